// Sign-in: the token lives in session storage (this tab, until it closes).
// `weft dev` prints a link carrying it in the URL fragment (#token=...),
// which browsers never send to a server; the canvas moves it to session
// storage and clears it from the address bar and the history entry. The
// token is only ever sent as a bearer header; its claims are read for
// display, never trusted: the API decides what the token may do.

export const TOKEN_KEY = 'weft.token';

export interface StorageLike {
  getItem(key: string): string | null;
  setItem(key: string, value: string): void;
  removeItem(key: string): void;
}

export interface LocationLike {
  pathname: string;
  search: string;
  hash: string;
}

export interface HistoryLike {
  replaceState(data: unknown, unused: string, url?: string): void;
}

/**
 * Takes a token from the fragment (#token=...) into storage and removes it
 * from the address bar. Other fragment parameters are kept. Returns whether
 * a token was taken.
 */
export function adoptFragmentToken(loc: LocationLike, storage: StorageLike, history: HistoryLike): boolean {
  const raw = loc.hash.startsWith('#') ? loc.hash.slice(1) : loc.hash;
  if (!raw) return false;
  const params = new URLSearchParams(raw);
  const token = params.get('token');
  if (token === null) return false;
  params.delete('token');
  const rest = params.toString();
  const t = token.trim();
  if (t) storage.setItem(TOKEN_KEY, t);
  history.replaceState(null, '', loc.pathname + loc.search + (rest ? `#${rest}` : ''));
  return t !== '';
}

export function readToken(storage: StorageLike): string | null {
  const t = storage.getItem(TOKEN_KEY);
  return t && t.trim() ? t.trim() : null;
}

/** Stores a pasted token; a "Bearer " prefix or surrounding blanks are dropped. */
export function storeToken(storage: StorageLike, pasted: string): string | null {
  const t = pasted.trim().replace(/^bearer\s+/i, '').replace(/^export\s+WEFT_TOKEN=/, '').trim();
  if (!t) return null;
  storage.setItem(TOKEN_KEY, t);
  return t;
}

export function clearToken(storage: StorageLike): void {
  storage.removeItem(TOKEN_KEY);
}

export interface Claims {
  sub?: string;
  tenant?: string;
  name?: string;
  scopes?: string[];
  exp?: number;
}

/** The token's claims for display (unverified), or null when unreadable. */
export function readClaims(token: string): Claims | null {
  const part = token.split('.')[1];
  if (!part) return null;
  try {
    const b64 = part.replace(/-/g, '+').replace(/_/g, '/');
    const json = decodeURIComponent(
      Array.from(atob(b64 + '='.repeat((4 - (b64.length % 4)) % 4)))
        .map((c) => '%' + c.charCodeAt(0).toString(16).padStart(2, '0'))
        .join(''),
    );
    const v = JSON.parse(json) as Claims;
    return v && typeof v === 'object' ? v : null;
  } catch {
    return null;
  }
}
