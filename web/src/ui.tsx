// Shared pieces: the session (token, client, navigation), the states every
// screen has (loading, empty, error, denied), badges and links.

import { createContext, useCallback, useContext, useEffect, useRef, useState, type ReactNode } from 'react';
import { ApiError, Client } from './api';
import { routePath, type Route } from './router';
import { STATUS_LABEL } from './runstate';
import type { NodeStatus } from './types';

export interface Session {
  client: Client;
  navigate(to: Route | string, opts?: { replace?: boolean }): void;
  /** The API refused the token (401): back to the sign-in screen. */
  signOut(reason?: string): void;
  narrow: boolean;
}

export const SessionContext = createContext<Session | null>(null);

export function useSession(): Session {
  const s = useContext(SessionContext);
  if (!s) throw new Error('no session');
  return s;
}

export type Load<T> =
  | { state: 'loading' }
  | { state: 'ok'; data: T }
  | { state: 'error'; error: ApiError };

export function asApiError(e: unknown): ApiError {
  if (e instanceof ApiError) return e;
  return new ApiError(0, 'ERROR', e instanceof Error ? e.message : String(e));
}

/** Loads data when deps change; a 401 signs the user out. */
export function useLoad<T>(fn: () => Promise<T>, deps: unknown[]): [Load<T>, () => void] {
  const { signOut } = useSession();
  const [load, setLoad] = useState<Load<T>>({ state: 'loading' });
  const [tick, setTick] = useState(0);
  const fnRef = useRef(fn);
  fnRef.current = fn;
  useEffect(() => {
    let live = true;
    setLoad({ state: 'loading' });
    fnRef.current().then(
      (data) => live && setLoad({ state: 'ok', data }),
      (e: unknown) => {
        if (!live) return;
        const err = asApiError(e);
        if (err.status === 401) signOut(err.message);
        setLoad({ state: 'error', error: err });
      },
    );
    return () => {
      live = false;
    };
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [...deps, tick]);
  const reload = useCallback(() => setTick((t) => t + 1), []);
  return [load, reload];
}

export function Link({ to, children, className, title }: { to: Route; children: ReactNode; className?: string; title?: string }) {
  const { navigate } = useSession();
  const href = routePath(to);
  return (
    <a
      href={href}
      className={className}
      title={title}
      onClick={(e) => {
        if (e.defaultPrevented || e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
        e.preventDefault();
        navigate(to);
      }}
    >
      {children}
    </a>
  );
}

export function Loading({ what }: { what: string }) {
  return (
    <div className="state state-loading" data-testid="state-loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      Loading {what}…
    </div>
  );
}

export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="state state-empty" data-testid="state-empty">
      <div className="state-title">{title}</div>
      {children && <div className="state-body">{children}</div>}
    </div>
  );
}

export function Denied({ error }: { error: ApiError }) {
  const scopes = error.missingScopes;
  return (
    <div className="state state-denied" data-testid="state-denied" role="alert">
      <svg className="state-icon" aria-hidden="true" viewBox="0 0 24 24" width="32" height="32">
        <rect x="5" y="10" width="14" height="10" rx="2" fill="none" stroke="currentColor" strokeWidth="1.8" />
        <path d="M8 10V7a4 4 0 0 1 8 0v3" fill="none" stroke="currentColor" strokeWidth="1.8" />
      </svg>
      <div className="state-title">Access denied</div>
      <div className="state-body">
        {scopes.length > 0 ? (
          <>
            Your token lacks the scope{scopes.length > 1 ? 's' : ''}{' '}
            {scopes.map((s, i) => (
              <span key={s}>
                {i > 0 && ', '}
                <code data-testid="missing-scope">{s}</code>
              </span>
            ))}{' '}
            this view needs. Ask for a token that holds {scopes.length > 1 ? 'them' : 'it'}.
          </>
        ) : (
          <>{error.message}</>
        )}
      </div>
      <div className="state-code">{error.code}</div>
    </div>
  );
}

export function ErrorState({ error, retry, what }: { error: ApiError; retry?: () => void; what: string }) {
  if (error.status === 403) return <Denied error={error} />;
  const notFound = error.status === 404;
  return (
    <div className="state state-error" data-testid={notFound ? 'state-not-found' : 'state-error'} role="alert">
      <div className="state-title">{notFound ? `No such ${what}` : `Could not load ${what}`}</div>
      <div className="state-body">{error.message}</div>
      <div className="state-code">{error.code}</div>
      {retry && !notFound && (
        <button type="button" className="btn" onClick={retry}>
          Try again
        </button>
      )}
    </div>
  );
}

/** Renders a Load: its loading and error states, or children(data). */
export function Loaded<T>({ load, what, retry, children }: { load: Load<T>; what: string; retry?: () => void; children: (data: T) => ReactNode }) {
  if (load.state === 'loading') return <Loading what={what} />;
  if (load.state === 'error') return <ErrorState error={load.error} retry={retry} what={what} />;
  return <>{children(load.data)}</>;
}

export function StatusBadge({ status, label }: { status: string; label?: string }) {
  const text = label ?? (STATUS_LABEL as Record<string, string>)[status as NodeStatus] ?? status;
  return (
    <span className={`badge status-${status}`} data-status={status}>
      {text}
    </span>
  );
}

export function ModeBadge({ mode }: { mode: string }) {
  if (mode !== 'simulation') return <span className="badge mode-live" title="live mode: real agents and actions">live mode</span>;
  return (
    <span className="badge mode-simulation" data-testid="simulation-badge" title="Agents, actions and waits were simulated: nothing was called">
      simulation
    </span>
  );
}

export function useNarrow(query = '(max-width: 640px)'): boolean {
  const get = () => typeof window !== 'undefined' && window.matchMedia(query).matches;
  const [narrow, setNarrow] = useState(get);
  useEffect(() => {
    const m = window.matchMedia(query);
    const on = () => setNarrow(m.matches);
    m.addEventListener('change', on);
    on();
    return () => m.removeEventListener('change', on);
  }, [query]);
  return narrow;
}

export function formatTime(iso?: string | null): string {
  if (!iso) return '—';
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso;
  return d.toLocaleString(undefined, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', second: '2-digit' });
}

export function formatDuration(ms: number | undefined): string {
  if (ms === undefined || !Number.isFinite(ms) || ms < 0) return '—';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(s < 10 ? 2 : 1)} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min ${Math.round(s - m * 60)} s`;
  const h = Math.floor(m / 60);
  return `${h} h ${m - h * 60} min`;
}

export function shortId(id: string): string {
  return id.length > 8 ? id.slice(0, 8) : id;
}

export function Json({ value }: { value: unknown }) {
  return <pre className="json">{JSON.stringify(value, null, 2)}</pre>;
}
