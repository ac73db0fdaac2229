import { describe, expect, it } from 'vitest';
import { adoptFragmentToken, readClaims, readToken, storeToken, TOKEN_KEY } from './auth';

function memory() {
  const m = new Map<string, string>();
  return {
    getItem: (k: string) => m.get(k) ?? null,
    setItem: (k: string, v: string) => void m.set(k, v),
    removeItem: (k: string) => void m.delete(k),
  };
}

describe('sign-in', () => {
  it('moves #token= into session storage and clears it from the address bar', () => {
    const storage = memory();
    const urls: string[] = [];
    const took = adoptFragmentToken({ pathname: '/ui/runs/r1', search: '?x=1', hash: '#token=abc.def.ghi' }, storage,
      { replaceState: (_d, _u, url) => void urls.push(url ?? '') });
    expect(took).toBe(true);
    expect(storage.getItem(TOKEN_KEY)).toBe('abc.def.ghi');
    expect(urls).toEqual(['/ui/runs/r1?x=1']);
  });

  it('keeps other fragment parameters and ignores fragments without a token', () => {
    const storage = memory();
    const urls: string[] = [];
    const history = { replaceState: (_d: unknown, _u: string, url?: string) => void urls.push(url ?? '') };
    expect(adoptFragmentToken({ pathname: '/ui/', search: '', hash: '#node=a' }, storage, history)).toBe(false);
    expect(urls).toEqual([]);
    expect(adoptFragmentToken({ pathname: '/ui/', search: '', hash: '#token=t1&node=a' }, storage, history)).toBe(true);
    expect(urls).toEqual(['/ui/#node=a']);
    expect(readToken(storage)).toBe('t1');
  });

  it('an empty #token= is cleared from the address bar but signs nobody in', () => {
    const storage = memory();
    const urls: string[] = [];
    expect(adoptFragmentToken({ pathname: '/ui/', search: '', hash: '#token=' }, storage,
      { replaceState: (_d, _u, url) => void urls.push(url ?? '') })).toBe(false);
    expect(urls).toEqual(['/ui/']);
    expect(readToken(storage)).toBeNull();
  });

  it('accepts a pasted token with a Bearer prefix or the export line weft dev prints', () => {
    const storage = memory();
    expect(storeToken(storage, '  Bearer x.y.z \n')).toBe('x.y.z');
    expect(storeToken(storage, 'export WEFT_TOKEN=a.b.c')).toBe('a.b.c');
    expect(storeToken(storage, '   ')).toBeNull();
    expect(readToken(storage)).toBe('a.b.c');
  });

  it('reads claims for display only, and survives garbage', () => {
    const payload = btoa(JSON.stringify({ sub: 'dev-user', tenant: 'dev', scopes: ['runs.read'] }))
      .replace(/=+$/, '').replace(/\+/g, '-').replace(/\//g, '_');
    expect(readClaims(`h.${payload}.s`)).toMatchObject({ sub: 'dev-user', tenant: 'dev' });
    expect(readClaims('garbage')).toBeNull();
    expect(readClaims('a.@@@.c')).toBeNull();
  });
});
