// The run view's state: a run's events folded into node, edge and run
// states. It mirrors the API's projection (api/runs.go applyNodeEvent) so
// the page and GET /v1/runs/{id} agree, and adds what only the page shows:
// every attempt with its error, retry delays, taken and dead edges, and
// recoveries (an attempt re-dispatched after a lost worker or an
// infrastructure fault).

import type { ApprovalState, NodeState, NodeStatus, Run, RunEvent, RunStatus } from './types';

/** Event types that re-dispatch an attempt (same attempt number). */
export const RECOVERY_EVENTS = ['node.attempt.lease_lost', 'node.attempt.infra_retry'] as const;

export interface AttemptView {
  attempt: number;
  error?: { type: string; message: string };
  retryable?: boolean;
  /** node.retry.scheduled after this attempt: the delay before the next. */
  retryDelayMs?: number;
}

export interface RecoveryView {
  type: string;
  attempt: number;
  code?: string;
  redispatch?: number;
  at: string;
}

export interface NodeView {
  id: string;
  kind: string;
  status: NodeStatus;
  attempt: number;
  port?: string;
  reason?: string;
  error?: string;
  attempts: AttemptView[];
  recoveries: RecoveryView[];
  /** Simulation: the virtual time of the node's latest event. */
  virtualAt?: string;
  /** The node's latest approval request and its outcome. */
  approval?: ApprovalState;
}

export type EdgeState = 'taken' | 'dead';

export interface RunState {
  status: RunStatus;
  nodes: Record<string, NodeView>;
  /** By edgeKey(from, to). Edges absent here are unresolved. */
  edges: Record<string, EdgeState>;
  lastSeq: number;
  cancelRequested: boolean;
  /** Simulation: the latest virtual time any event carried. */
  virtualNow?: string;
  virtualStart?: string;
  error?: { code?: string; message?: string; nodeId?: string };
}

export function edgeKey(from: string, to: string): string {
  return `${from}->${to}`;
}

const TERMINAL: RunStatus[] = ['succeeded', 'failed', 'cancelled'];

export function isTerminal(status: string): boolean {
  return (TERMINAL as string[]).includes(status);
}

function newNode(id: string, kind: string): NodeView {
  return { id, kind, status: 'pending', attempt: 0, attempts: [], recoveries: [] };
}

/**
 * The state before any event: every node pending. nodes lists the run's
 * nodes (in compiled order) from its graph or from GET /v1/runs/{id}.
 */
export function initialState(run: Pick<Run, 'status'>, nodes: { id: string; kind: string }[]): RunState {
  const out: RunState = { status: run.status, nodes: {}, edges: {}, lastSeq: 0, cancelRequested: false };
  for (const n of nodes) out.nodes[n.id] = newNode(n.id, n.kind);
  return out;
}

function str(v: unknown): string | undefined {
  return typeof v === 'string' ? v : undefined;
}

function num(v: unknown): number | undefined {
  return typeof v === 'number' && Number.isFinite(v) ? v : undefined;
}

function errorOf(d: Record<string, unknown>): { type: string; message: string } | undefined {
  const e = d.error as { type?: unknown; message?: unknown } | undefined;
  if (!e || typeof e !== 'object') return undefined;
  return { type: str(e.type) ?? 'ERROR', message: str(e.message) ?? '' };
}

function attemptEntry(n: NodeView, attempt: number): AttemptView {
  let a = n.attempts.find((x) => x.attempt === attempt);
  if (!a) {
    a = { attempt };
    n.attempts.push(a);
    n.attempts.sort((x, y) => x.attempt - y.attempt);
  }
  return a;
}

/**
 * Folds events (in seq order; already-applied seqs are ignored, so a
 * replayed batch changes nothing) into a new state.
 */
export function applyEvents(state: RunState, events: RunEvent[]): RunState {
  const s: RunState = {
    ...state,
    nodes: Object.fromEntries(
      Object.entries(state.nodes).map(([k, n]) => [
        k,
        { ...n, attempts: n.attempts.map((a) => ({ ...a })), recoveries: [...n.recoveries], approval: n.approval && { ...n.approval } },
      ]),
    ),
    edges: { ...state.edges },
  };
  for (const ev of events) {
    if (ev.seq <= s.lastSeq) continue;
    s.lastSeq = ev.seq;
    applyOne(s, ev);
  }
  return s;
}

function applyOne(s: RunState, ev: RunEvent): void {
  const d = (ev.data ?? {}) as Record<string, unknown>;
  const virtualAt = str(d.virtualAt);
  if (virtualAt) {
    s.virtualNow = virtualAt;
    if (!s.virtualStart) s.virtualStart = virtualAt;
  }
  switch (ev.type) {
    case 'run.admitted':
      // A throttled run got its slot: its start is being issued.
      if (s.status === 'throttled') s.status = 'queued';
      return;
    case 'run.started':
      if (s.status === 'queued' || s.status === 'throttled') s.status = 'running';
      return;
    case 'run.cancel.requested':
      s.cancelRequested = true;
      return;
    case 'run.succeeded':
      s.status = 'succeeded';
      return;
    case 'run.failed':
      s.status = 'failed';
      s.error = (d.runError as RunState['error']) ?? s.error;
      return;
    case 'run.cancelled':
      s.status = 'cancelled';
      s.error = (d.runError as RunState['error']) ?? s.error;
      return;
    case 'edge.taken':
    case 'edge.dead': {
      const from = str(d.from);
      const to = str(d.to);
      if (from && to) s.edges[edgeKey(from, to)] = ev.type === 'edge.taken' ? 'taken' : 'dead';
      return;
    }
  }
  if (!ev.nodeId) return;
  let n = s.nodes[ev.nodeId];
  if (!n) {
    // A node the page did not know (a graph it could not load): show it.
    n = newNode(ev.nodeId, str(d.kind) ?? '');
    s.nodes[ev.nodeId] = n;
  }
  if (virtualAt) n.virtualAt = virtualAt;
  const attempt = ev.attempt ?? 0;
  if (attempt > n.attempt) n.attempt = attempt;
  switch (ev.type) {
    case 'node.started':
      n.status = 'running';
      n.reason = undefined;
      n.error = undefined;
      if (!n.kind && str(d.kind)) n.kind = str(d.kind)!;
      if (attempt > 0) attemptEntry(n, attempt);
      break;
    case 'node.attempt.failed': {
      const a = attemptEntry(n, num(d.attempt) ?? attempt);
      a.error = errorOf(d);
      if (typeof d.retryable === 'boolean') a.retryable = d.retryable;
      break;
    }
    case 'node.retry.scheduled': {
      n.status = 'waiting';
      const a = attemptEntry(n, attempt);
      const delay = num(d.delayMs);
      if (delay !== undefined) a.retryDelayMs = delay;
      break;
    }
    case 'node.completed':
      n.status = 'succeeded';
      n.port = str(d.port);
      n.reason = undefined;
      n.error = undefined;
      break;
    case 'node.failed': {
      n.status = 'failed';
      const e = errorOf(d);
      n.reason = e?.type;
      n.error = e?.message;
      break;
    }
    case 'node.skipped':
      n.status = 'skipped';
      n.reason = str(d.reason);
      break;
    case 'node.cancel.acknowledged': {
      n.status = 'cancelled';
      n.reason = 'CANCELLED';
      if (n.approval?.status === 'pending') n.approval.status = 'cancelled';
      const e = errorOf(d);
      if (e) {
        n.reason = e.type;
        n.error = e.message;
      }
      break;
    }
    case 'node.approval.requested':
      n.status = 'awaiting_approval';
      n.approval = {
        request: num(d.request) ?? 1,
        status: 'pending',
        timeoutMs: num(d.timeoutMs) ?? 0,
        requestedAt: virtualAt ?? ev.at,
        deadlineAt: str(d.deadlineAt),
        call: d.call as ApprovalState['call'],
      };
      break;
    case 'node.approval.decided':
    case 'node.approval.timed_out':
      if (n.approval && n.approval.request === (num(d.request) ?? n.approval.request)) {
        n.approval.decidedAt = virtualAt ?? ev.at;
        n.approval.status = 'timed_out';
        if (ev.type === 'node.approval.decided') {
          n.approval.status = d.decision === 'approve' ? 'approved' : 'rejected';
          n.approval.actor = d.actor as ApprovalState['actor'];
          n.approval.comment = str(d.comment);
        }
      }
      // An approval node completes next; an agent resumes its attempt.
      n.status = 'running';
      break;
    case 'node.cancel.unacknowledged':
      n.status = 'cancelled';
      n.reason = 'CANCEL_UNACKNOWLEDGED';
      break;
    case 'node.late.result':
      n.status = 'cancelled';
      n.port = str(d.port);
      n.reason = 'LATE_RESULT';
      break;
    case 'node.attempt.lease_lost':
    case 'node.attempt.infra_retry':
      // The attempt is dispatched again (same attempt number): the node
      // keeps running, and shows it recovered.
      n.recoveries.push({
        type: ev.type,
        attempt,
        code: str(d.code),
        redispatch: num(d.redispatch),
        at: ev.at,
      });
      break;
  }
}

/**
 * The state shown for a run whose status is final: as the API does, no
 * node is left pending, running or waiting (the run closed without
 * settling it); such a node shows cancelled with reason RUN_CLOSED.
 */
export function settle(state: RunState, runStatus: RunStatus): RunState {
  const status = isTerminal(state.status) ? state.status : runStatus;
  if (!isTerminal(status)) return state;
  const nodes: Record<string, NodeView> = {};
  for (const [id, n] of Object.entries(state.nodes)) {
    nodes[id] = n.status === 'pending' || n.status === 'running' || n.status === 'waiting' || n.status === 'awaiting_approval'
      ? {
          ...n,
          status: 'cancelled',
          reason: 'RUN_CLOSED',
          approval: n.approval?.status === 'pending' ? { ...n.approval, status: 'cancelled' } : n.approval,
        }
      : n;
  }
  return { ...state, status, nodes };
}

/**
 * A run whose events are gone (deleted by retention) still has the API's
 * projection: use it when the log gave the page nothing.
 */
export function fromProjection(run: Run): RunState {
  const s = initialState(run, (run.nodes ?? []).map((n) => ({ id: n.id, kind: n.kind })));
  for (const n of run.nodes ?? []) {
    const v = s.nodes[n.id];
    Object.assign(v, projectionFields(n));
  }
  return s;
}

function projectionFields(n: NodeState): Partial<NodeView> {
  return { status: n.status, attempt: n.attempt, port: n.port, reason: n.reason, error: n.error, approval: n.approval };
}

/** Words a person reads for a node status. */
export const STATUS_LABEL: Record<NodeStatus, string> = {
  pending: 'pending',
  running: 'running',
  waiting: 'waiting for retry',
  awaiting_approval: 'awaiting approval',
  succeeded: 'succeeded',
  failed: 'failed',
  skipped: 'skipped',
  cancelled: 'cancelled',
};

/** The label of a run status: a throttled run shows its place in the queue. */
export function runStatusLabel(status: string, position?: number): string {
  if (status === 'throttled') return position ? `throttled #${position}` : 'throttled';
  return status;
}

/** Whether a node lies on a dead path (skipped because an input died). */
export function onDeadPath(n: NodeView): boolean {
  return n.status === 'skipped' && n.reason === 'DEAD_INPUT';
}

/** The nodes waiting for a person's decision, in the order given. */
export function awaitingApproval(s: RunState): NodeView[] {
  return Object.values(s.nodes).filter((n) => n.status === 'awaiting_approval' && n.approval?.status === 'pending');
}

/** Virtual time elapsed in a simulation, in ms, or undefined. */
export function virtualElapsedMs(s: RunState): number | undefined {
  if (!s.virtualStart || !s.virtualNow) return undefined;
  const ms = Date.parse(s.virtualNow) - Date.parse(s.virtualStart);
  return Number.isFinite(ms) ? ms : undefined;
}
