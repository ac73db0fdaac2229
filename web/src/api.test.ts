import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ApiError, buildPath, Client, ROUTES } from './api';

// The document the Go API is checked against (api/openapi_test.go).
const doc = parse(readFileSync(fileURLToPath(new URL('../../api/openapi.yaml', import.meta.url)), 'utf8')) as {
  paths: Record<string, Record<string, unknown>>;
};

describe('the API client', () => {
  it('calls only routes the OpenAPI document has', () => {
    for (const [name, r] of Object.entries(ROUTES)) {
      const item = doc.paths[r.path];
      expect(item, `${name}: ${r.path} is not in api/openapi.yaml`).toBeDefined();
      expect(item[r.method.toLowerCase()], `${name}: ${r.method} ${r.path} is not in api/openapi.yaml`).toBeDefined();
    }
  });

  it('fills path parameters, encoded', () => {
    expect(buildPath(ROUTES.getRevision.path, { key: 'a b', n: 2 })).toBe('/v1/workflows/a%20b/revisions/2');
    expect(() => buildPath(ROUTES.getRun.path, {})).toThrow();
  });

  it('sends the bearer token and reads error answers into ApiError with the missing scope', async () => {
    const calls: { url: string; init: RequestInit }[] = [];
    const fake = (async (url: string, init: RequestInit) => {
      calls.push({ url, init });
      return new Response(JSON.stringify({ error: { code: 'MISSING_SCOPE', message: 'this route needs scope runs.read', details: { missing: ['runs.read'] } } }),
        { status: 403, headers: { 'Content-Type': 'application/json' } });
    }) as unknown as typeof fetch;
    const c = new Client(() => 'tok', fake);
    const err = await c.getRun('r1').catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ApiError);
    expect((err as ApiError).status).toBe(403);
    expect((err as ApiError).missingScopes).toEqual(['runs.read']);
    expect(calls[0].url).toBe('/v1/runs/r1');
    expect((calls[0].init.headers as Record<string, string>).Authorization).toBe('Bearer tok');
  });

  it('resumes a dropped stream with Last-Event-ID and hands each event over once', async () => {
    const lastIds: string[] = [];
    let n = 0;
    const ev = (seq: number) => `id: ${seq}\ndata: ${JSON.stringify({ seq, type: 'node.started' })}\n\n`;
    const fake = (async (_url: string, init: RequestInit) => {
      lastIds.push((init.headers as Record<string, string>)['Last-Event-ID']);
      n++;
      const body = n === 1
        ? 'retry: 1\n\n' + ev(1) + ev(2) + 'id: 3\ndata: {"seq":3' // cut mid-message: the connection drops
        : ev(2) + ev(3) + 'event: end\ndata: {"status":"succeeded","lastSeq":3}\n\n'; // 2 again: the client skips it
      return new Response(body, { status: 200, headers: { 'Content-Type': 'text/event-stream' } });
    }) as unknown as typeof fetch;
    const seen: number[] = [];
    const c = new Client(() => 't', fake);
    const end = await c.streamRunEvents('r1', 0, { onEvents: (evs) => seen.push(...evs.map((e) => e.seq)) },
      new AbortController().signal);
    expect(end).toEqual({ status: 'succeeded', lastSeq: 3 });
    expect(seen).toEqual([1, 2, 3]);
    expect(lastIds).toEqual(['0', '2']);
  });

  it('gives up on an error answer of the stream', async () => {
    const fake = (async () => new Response(JSON.stringify({ error: { code: 'NOT_FOUND', message: 'run not found' } }),
      { status: 404 })) as unknown as typeof fetch;
    const c = new Client(() => 't', fake);
    await expect(c.streamRunEvents('r1', 0, { onEvents: () => {} }, new AbortController().signal))
      .rejects.toMatchObject({ status: 404, code: 'NOT_FOUND' });
  });
});
