// The one typed client of the weft API the canvas uses. Every call goes
// through a route of ROUTES, and api.test.ts checks each of them against
// api/openapi.yaml, so the canvas cannot call what the API does not offer.
// The API stays the only authority: the client sends the user's token and
// reports what the server answered.

import { SSEParser } from './sse';
import type {
  ActionInfo,
  AgentInfo,
  DryRun,
  Graph,
  Layout,
  Page,
  Replay,
  Variable,
  RevisionDetail,
  Run,
  RunEvent,
  WorkflowDetail,
  WorkflowSummary,
} from './types';

export interface Route {
  method: 'GET' | 'POST' | 'PUT';
  /** OpenAPI path template, e.g. /v1/runs/{id}. */
  path: string;
}

export const ROUTES = {
  listWorkflows: { method: 'GET', path: '/v1/workflows' },
  getWorkflow: { method: 'GET', path: '/v1/workflows/{key}' },
  getRevision: { method: 'GET', path: '/v1/workflows/{key}/revisions/{n}' },
  listRuns: { method: 'GET', path: '/v1/runs' },
  getRun: { method: 'GET', path: '/v1/runs/{id}' },
  cancelRun: { method: 'POST', path: '/v1/runs/{id}/cancel' },
  decideApproval: { method: 'POST', path: '/v1/runs/{id}/approvals/{nodeId}' },
  streamRunEvents: { method: 'GET', path: '/v1/runs/{id}/events/stream' },
  createWorkflow: { method: 'POST', path: '/v1/workflows' },
  saveDraft: { method: 'PUT', path: '/v1/workflows/{key}/draft' },
  getDraft: { method: 'GET', path: '/v1/workflows/{key}/draft' },
  dryRun: { method: 'POST', path: '/v1/workflows/{key}/dry-run' },
  checkGraph: { method: 'POST', path: '/v1/graphs/check' },
  publish: { method: 'POST', path: '/v1/workflows/{key}/publish' },
  getLayout: { method: 'GET', path: '/v1/workflows/{key}/layout' },
  setLayout: { method: 'PUT', path: '/v1/workflows/{key}/layout' },
  listActions: { method: 'GET', path: '/v1/actions' },
  listAgents: { method: 'GET', path: '/v1/agents' },
  listVariables: { method: 'GET', path: '/v1/variables' },
  enqueueRun: { method: 'POST', path: '/v1/workflows/{key}/runs' },
  getReplay: { method: 'GET', path: '/v1/replays/{id}' },
  listReplays: { method: 'GET', path: '/v1/workflows/{key}/replays' },
} as const satisfies Record<string, Route>;

/** An error answer of the API, or a failure to reach it (status 0). */
export class ApiError extends Error {
  readonly status: number;
  readonly code: string;
  readonly details: Record<string, unknown>;
  constructor(status: number, code: string, message: string, details: Record<string, unknown> = {}) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.details = details;
  }
  /** The scopes a 403 MISSING_SCOPE names (details.missing). */
  get missingScopes(): string[] {
    const m = this.details.missing;
    return Array.isArray(m) ? m.filter((s): s is string => typeof s === 'string') : [];
  }
}

/** Fills a path template; every value is URI-encoded. */
export function buildPath(template: string, params: Record<string, string | number> = {}): string {
  return template.replace(/\{([^}]+)\}/g, (_, name: string) => {
    const v = params[name];
    if (v === undefined) throw new Error(`path parameter ${name} missing for ${template}`);
    return encodeURIComponent(String(v));
  });
}

function query(q: Record<string, string | number | undefined | null>): string {
  const p = new URLSearchParams();
  for (const [k, v] of Object.entries(q)) {
    if (v !== undefined && v !== null && v !== '') p.set(k, String(v));
  }
  const s = p.toString();
  return s ? `?${s}` : '';
}

/** Reads an error answer into an ApiError. */
export async function errorFrom(res: Response): Promise<ApiError> {
  let body: unknown;
  try {
    body = await res.json();
  } catch {
    body = undefined;
  }
  const e = (body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | undefined)?.error;
  if (e && typeof e.code === 'string') {
    const details = e.details && typeof e.details === 'object' ? (e.details as Record<string, unknown>) : {};
    return new ApiError(res.status, e.code, typeof e.message === 'string' ? e.message : e.code, details);
  }
  return new ApiError(res.status, 'HTTP_' + res.status, `the server answered ${res.status}`);
}

export interface RunFilter {
  workflowKey?: string;
  status?: string;
  mode?: string;
  cursor?: string | null;
  limit?: number;
}

export interface StreamHandlers {
  onEvents(events: RunEvent[]): void;
  /** The stream is connected (true) or reconnecting (false). */
  onState?(connected: boolean): void;
}

export interface StreamResult {
  status: string;
  lastSeq: number;
}

type Fetch = typeof fetch;

export class Client {
  private readonly token: () => string | null;
  private readonly fetchImpl: Fetch;
  private readonly base: string;

  constructor(token: () => string | null, fetchImpl: Fetch = (...a) => fetch(...a), base = '') {
    this.token = token;
    this.fetchImpl = fetchImpl;
    this.base = base;
  }

  private headers(extra: Record<string, string> = {}): Record<string, string> {
    const h: Record<string, string> = { Accept: 'application/json', ...extra };
    const t = this.token();
    if (t) h.Authorization = `Bearer ${t}`;
    return h;
  }

  private async call<T>(route: Route, params: Record<string, string | number> = {}, q = '', body: unknown = {}): Promise<T> {
    let res: Response;
    try {
      res = await this.fetchImpl(this.base + buildPath(route.path, params) + q, {
        method: route.method,
        headers: this.headers(route.method !== 'GET' ? { 'Content-Type': 'application/json' } : {}),
        body: route.method !== 'GET' ? JSON.stringify(body) : undefined,
      });
    } catch (err) {
      throw new ApiError(0, 'NETWORK', `the API could not be reached: ${(err as Error).message}`);
    }
    if (!res.ok) throw await errorFrom(res);
    return (await res.json()) as T;
  }

  async listWorkflows(cursor?: string | null, limit = 50): Promise<Page<WorkflowSummary>> {
    const b = await this.call<{ workflows: WorkflowSummary[]; nextCursor: string | null }>(
      ROUTES.listWorkflows, {}, query({ cursor, limit }));
    return { items: b.workflows, nextCursor: b.nextCursor };
  }

  getWorkflow(key: string): Promise<WorkflowDetail> {
    return this.call(ROUTES.getWorkflow, { key });
  }

  getRevision(key: string, n: number): Promise<RevisionDetail> {
    return this.call(ROUTES.getRevision, { key, n });
  }

  async listRuns(f: RunFilter = {}): Promise<Page<Run>> {
    const b = await this.call<{ runs: Run[]; nextCursor: string | null }>(ROUTES.listRuns, {},
      query({ workflowKey: f.workflowKey, status: f.status, mode: f.mode, cursor: f.cursor, limit: f.limit }));
    return { items: b.runs, nextCursor: b.nextCursor };
  }

  getRun(id: string): Promise<Run> {
    return this.call(ROUTES.getRun, { id });
  }

  cancelRun(id: string): Promise<{ runId: string; status: string }> {
    return this.call(ROUTES.cancelRun, { id });
  }

  /** Approves or rejects what node nodeId of run id waits for, as the signed-in user. */
  decideApproval(id: string, nodeId: string, decision: 'approve' | 'reject', comment?: string): Promise<{ status: string }> {
    return this.call(ROUTES.decideApproval, { id, nodeId }, '', comment ? { decision, comment } : { decision });
  }

  createWorkflow(key: string, graph: Graph): Promise<{ key: string; draftRevision: number }> {
    return this.call(ROUTES.createWorkflow, {}, '', { key, graph });
  }

  /** Saves graph as the next draft; 409 REVISION_CONFLICT when expectedRevision is not the latest. */
  saveDraft(key: string, expectedRevision: number, graph: Graph): Promise<{ key: string; draftRevision: number }> {
    return this.call(ROUTES.saveDraft, { key }, '', { expectedRevision, graph });
  }

  /** Draft revision of key as the server's YAML export writes it (what `weft pull` reads). */
  async getDraftYAML(key: string, revision: number): Promise<string> {
    const res = await this.raw(ROUTES.getDraft, { key }, query({ format: 'yaml', revision }), { Accept: 'application/yaml' });
    return res.text();
  }

  /** Saves a YAML graph document as the next draft (409 REVISION_CONFLICT when expectedRevision is stale). */
  async saveDraftYAML(key: string, expectedRevision: number, yaml: string): Promise<{ key: string; draftRevision: number }> {
    const res = await this.raw(ROUTES.saveDraft, { key }, query({ expectedRevision }), { 'Content-Type': 'application/yaml' }, yaml);
    return (await res.json()) as { key: string; draftRevision: number };
  }

  private async raw(route: Route, params: Record<string, string | number>, q: string, headers: Record<string, string>, body?: string): Promise<Response> {
    let res: Response;
    try {
      res = await this.fetchImpl(this.base + buildPath(route.path, params) + q, { method: route.method, headers: this.headers(headers), body });
    } catch (err) {
      throw new ApiError(0, 'NETWORK', `the API could not be reached: ${(err as Error).message}`);
    }
    if (!res.ok) throw await errorFrom(res);
    return res;
  }

  dryRun(key: string, draftRevision?: number): Promise<DryRun & { key: string; draftRevision: number }> {
    return this.call(ROUTES.dryRun, { key }, '', draftRevision ? { draftRevision } : {});
  }

  /** The dry-run of an unsaved graph, with the caller's scopes. */
  checkGraph(graph: Graph): Promise<DryRun> {
    return this.call(ROUTES.checkGraph, {}, '', { graph });
  }

  publish(key: string, expectedRevision: number): Promise<{ key: string; revision: number; checksum: string; draftRevision: number }> {
    return this.call(ROUTES.publish, { key }, '', { expectedRevision });
  }

  getLayout(key: string): Promise<Layout> {
    return this.call(ROUTES.getLayout, { key });
  }

  setLayout(key: string, positions: Layout['positions']): Promise<Layout> {
    return this.call(ROUTES.setLayout, { key }, '', { positions });
  }

  async listActions(): Promise<ActionInfo[]> {
    return (await this.call<{ actions: ActionInfo[] }>(ROUTES.listActions)).actions;
  }

  async listAgents(): Promise<AgentInfo[]> {
    const out: AgentInfo[] = [];
    let cursor: string | null = null;
    do {
      const b: { agents: AgentInfo[]; nextCursor: string | null } = await this.call(ROUTES.listAgents, {}, query({ cursor, limit: 200 }));
      out.push(...b.agents);
      cursor = b.nextCursor;
    } while (cursor);
    return out;
  }

  async listVariables(): Promise<Variable[]> {
    return (await this.call<{ variables: Variable[] }>(ROUTES.listVariables)).variables;
  }

  enqueueRun(key: string, body: Record<string, unknown>): Promise<{ runId: string; status: string }> {
    return this.call(ROUTES.enqueueRun, { key }, '', body);
  }

  /** A replay of recorded live runs through a draft, with each run's verdict. */
  getReplay(id: string): Promise<Replay> {
    return this.call(ROUTES.getReplay, { id });
  }

  /** A workflow's replays, newest first, without their runs. */
  async listReplays(key: string, limit = 5): Promise<Page<Replay>> {
    const b = await this.call<{ replays: Replay[]; nextCursor: string | null }>(ROUTES.listReplays, { key }, query({ limit }));
    return { items: b.replays, nextCursor: b.nextCursor };
  }

  /**
   * Follows a run's events from after `after` until the run's terminal
   * event: one stream, resumed with Last-Event-ID after a dropped
   * connection (so no event is lost or repeated), given up on an error
   * answer (401, 403, 404, 429: thrown as ApiError) or when signal aborts.
   */
  async streamRunEvents(id: string, after: number, h: StreamHandlers, signal: AbortSignal): Promise<StreamResult | null> {
    let last = after;
    let retryMs = 2000;
    let failures = 0;
    while (!signal.aborted) {
      let res: Response | undefined;
      try {
        res = await this.fetchImpl(this.base + buildPath(ROUTES.streamRunEvents.path, { id }), {
          method: 'GET',
          headers: this.headers({ Accept: 'text/event-stream', 'Last-Event-ID': String(last) }),
          signal,
          cache: 'no-store',
        });
      } catch {
        res = undefined;
      }
      if (signal.aborted) return null;
      if (res && !res.ok) {
        // 503 (a replica shutting down) is worth another try; the rest is final.
        if (res.status !== 503) throw await errorFrom(res);
      } else if (res && res.body) {
        h.onState?.(true);
        failures = 0;
        const parser = new SSEParser();
        const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
        try {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            const batch: RunEvent[] = [];
            for (const m of parser.push(value)) {
              if (m.retry !== undefined) retryMs = m.retry;
              if (m.event === 'end') {
                if (batch.length) h.onEvents(batch);
                const end = JSON.parse(m.data) as StreamResult;
                return end;
              }
              if (m.event === 'message' && m.data) {
                const ev = JSON.parse(m.data) as RunEvent;
                if (ev.seq > last) {
                  batch.push(ev);
                  last = ev.seq;
                }
              }
            }
            if (batch.length) h.onEvents(batch);
          }
        } catch {
          // The connection dropped: resume below.
        } finally {
          reader.releaseLock();
        }
      }
      if (signal.aborted) return null;
      h.onState?.(false);
      failures++;
      const wait = Math.min(retryMs * Math.max(1, failures), 15000);
      await sleep(wait, signal);
    }
    return null;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    const t = setTimeout(done, ms);
    function done() {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done);
  });
}
