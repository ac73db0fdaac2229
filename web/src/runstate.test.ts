import { describe, expect, it } from 'vitest';
import {
  applyEvents,
  awaitingApproval,
  edgeKey,
  fromProjection,
  initialState,
  onDeadPath,
  RECOVERY_EVENTS,
  runStatusLabel,
  settle,
  STATUS_LABEL,
  virtualElapsedMs,
} from './runstate';
import type { Run, RunEvent } from './types';

let seq = 0;
function ev(type: string, nodeId?: string, attempt?: number, data: Record<string, unknown> = {}): RunEvent {
  seq++;
  return { seq, type, schemaVersion: 1, at: '2026-12-01T10:00:00Z', nodeId, attempt, data, prevHash: '', hash: '' };
}

const diamond = [
  { id: 'in', kind: 'input' },
  { id: 'check', kind: 'gate' },
  { id: 'left', kind: 'action' },
  { id: 'right', kind: 'action' },
  { id: 'join', kind: 'merge' },
  { id: 'out', kind: 'output' },
];

describe('node states from events', () => {
  it('maps a diamond run to each node final state, taken and dead edges', () => {
    seq = 0;
    let s = initialState({ status: 'queued' }, diamond);
    expect(Object.values(s.nodes).every((n) => n.status === 'pending')).toBe(true);
    s = applyEvents(s, [
      ev('run.started'),
      ev('node.started', 'in', 1, { kind: 'input' }),
      ev('node.completed', 'in', 1, { port: 'out' }),
      ev('edge.taken', 'in', 1, { from: 'in.out', to: 'check.in' }),
      ev('node.started', 'check', 1),
    ]);
    expect(s.status).toBe('running');
    expect(s.nodes.check.status).toBe('running');
    s = applyEvents(s, [
      ev('node.completed', 'check', 1, { port: 'pass' }),
      ev('edge.taken', 'check', 1, { from: 'check.pass', to: 'left.in' }),
      ev('edge.dead', 'check', 1, { from: 'check.fail', to: 'right.in' }),
      ev('node.skipped', 'right', 0, { reason: 'DEAD_INPUT' }),
      ev('edge.dead', 'right', 0, { from: 'right.out', to: 'join.b' }),
      ev('node.started', 'left', 1),
      ev('node.completed', 'left', 1, { port: 'out' }),
      ev('edge.taken', 'left', 1, { from: 'left.out', to: 'join.a' }),
      ev('node.started', 'join', 1),
      ev('node.completed', 'join', 1, { port: 'out' }),
      ev('edge.taken', 'join', 1, { from: 'join.out', to: 'out.in' }),
      ev('node.started', 'out', 1),
      ev('node.completed', 'out', 1, {}),
      ev('run.succeeded', undefined, undefined, { nodeId: 'out' }),
    ]);
    expect(s.status).toBe('succeeded');
    expect(Object.fromEntries(Object.values(s.nodes).map((n) => [n.id, n.status]))).toEqual({
      in: 'succeeded', check: 'succeeded', left: 'succeeded', right: 'skipped', join: 'succeeded', out: 'succeeded',
    });
    expect(s.nodes.check.port).toBe('pass');
    expect(onDeadPath(s.nodes.right)).toBe(true);
    expect(onDeadPath(s.nodes.left)).toBe(false);
    expect(s.edges[edgeKey('check.pass', 'left.in')]).toBe('taken');
    expect(s.edges[edgeKey('check.fail', 'right.in')]).toBe('dead');
    expect(s.edges[edgeKey('right.out', 'join.b')]).toBe('dead');
    expect(s.lastSeq).toBe(seq);
  });

  it('records every attempt with its error, waits for retry, and fails', () => {
    seq = 0;
    let s = initialState({ status: 'running' }, [{ id: 'flaky', kind: 'action' }]);
    s = applyEvents(s, [
      ev('node.started', 'flaky', 1),
      ev('node.attempt.failed', 'flaky', 1, { attempt: 1, error: { type: 'ACTION_FAILED', message: 'boom' }, retryable: true }),
      ev('node.retry.scheduled', 'flaky', 1, { delayMs: 1000, nextAttempt: 2 }),
    ]);
    expect(s.nodes.flaky.status).toBe('waiting');
    expect(STATUS_LABEL[s.nodes.flaky.status]).toBe('waiting for retry');
    s = applyEvents(s, [
      ev('node.started', 'flaky', 2),
      ev('node.attempt.failed', 'flaky', 2, { attempt: 2, error: { type: 'ACTION_FAILED', message: 'boom again' }, retryable: false }),
      ev('node.failed', 'flaky', 2, { attempts: 2, error: { type: 'ACTION_FAILED', message: 'boom again' } }),
      ev('run.failed', undefined, undefined, { runError: { code: 'NODE_FAILED', message: 'node flaky failed', nodeId: 'flaky' } }),
    ]);
    const n = s.nodes.flaky;
    expect(n.status).toBe('failed');
    expect(n.attempt).toBe(2);
    expect(n.reason).toBe('ACTION_FAILED');
    expect(n.error).toBe('boom again');
    expect(n.attempts).toEqual([
      { attempt: 1, error: { type: 'ACTION_FAILED', message: 'boom' }, retryable: true, retryDelayMs: 1000 },
      { attempt: 2, error: { type: 'ACTION_FAILED', message: 'boom again' }, retryable: false },
    ]);
    expect(s.status).toBe('failed');
    expect(s.error?.code).toBe('NODE_FAILED');
  });

  it('shows a cancellation: requested, acknowledged, skipped, cancelled', () => {
    seq = 0;
    let s = initialState({ status: 'running' }, [{ id: 'nap', kind: 'action' }, { id: 'out', kind: 'output' }]);
    s = applyEvents(s, [
      ev('node.started', 'nap', 1),
      ev('run.cancel.requested', undefined, undefined, { reason: 'by alice' }),
      ev('node.cancel.acknowledged', 'nap', 1),
      ev('node.skipped', 'out', 0, { reason: 'CANCELLED' }),
      ev('run.cancelled', undefined, undefined, { runError: { code: 'CANCELLED', message: 'cancelled' } }),
    ]);
    expect(s.cancelRequested).toBe(true);
    expect(s.nodes.nap).toMatchObject({ status: 'cancelled', reason: 'CANCELLED' });
    expect(s.nodes.out).toMatchObject({ status: 'skipped', reason: 'CANCELLED' });
    expect(s.status).toBe('cancelled');
  });

  it('marks a node recovered when its attempt is re-dispatched after a lost lease or an infrastructure fault', () => {
    seq = 0;
    expect(RECOVERY_EVENTS).toEqual(['node.attempt.lease_lost', 'node.attempt.infra_retry']);
    let s = initialState({ status: 'running' }, [{ id: 'work', kind: 'action' }]);
    s = applyEvents(s, [
      ev('node.started', 'work', 1),
      ev('node.attempt.lease_lost', 'work', 1, { code: 'WORKER_LOST', redispatch: 1 }),
    ]);
    // Still the same attempt, still running: the work goes on elsewhere.
    expect(s.nodes.work).toMatchObject({ status: 'running', attempt: 1 });
    expect(s.nodes.work.recoveries).toEqual([
      { type: 'node.attempt.lease_lost', attempt: 1, code: 'WORKER_LOST', redispatch: 1, at: '2026-12-01T10:00:00Z' },
    ]);
    s = applyEvents(s, [
      ev('node.attempt.infra_retry', 'work', 1, { code: 'UNAVAILABLE', redispatch: 2 }),
      ev('node.completed', 'work', 1, { port: 'out' }),
    ]);
    expect(s.nodes.work.status).toBe('succeeded');
    expect(s.nodes.work.recoveries.map((r) => [r.type, r.code, r.redispatch])).toEqual([
      ['node.attempt.lease_lost', 'WORKER_LOST', 1],
      ['node.attempt.infra_retry', 'UNAVAILABLE', 2],
    ]);
    expect(s.nodes.work.attempts.map((a) => a.attempt)).toEqual([1]);
  });

  it('ignores replayed seqs, so a resumed stream changes nothing twice', () => {
    seq = 0;
    const events = [ev('node.started', 'a', 1), ev('node.attempt.lease_lost', 'a', 1, { code: 'X', redispatch: 1 })];
    const once = applyEvents(initialState({ status: 'running' }, [{ id: 'a', kind: 'action' }]), events);
    const twice = applyEvents(once, events);
    expect(twice).toEqual(once);
    expect(twice.nodes.a.recoveries).toHaveLength(1);
  });

  it('does not mutate the state it was given', () => {
    seq = 0;
    const s0 = initialState({ status: 'queued' }, [{ id: 'a', kind: 'action' }]);
    const s1 = applyEvents(s0, [ev('node.started', 'a', 1)]);
    expect(s0.nodes.a.status).toBe('pending');
    expect(s1.nodes.a.status).toBe('running');
  });

  it('shows a node of an unknown graph when its events arrive', () => {
    seq = 0;
    const s = applyEvents(initialState({ status: 'running' }, []), [ev('node.started', 'x', 1, { kind: 'gate' })]);
    expect(s.nodes.x).toMatchObject({ kind: 'gate', status: 'running' });
  });

  it('tracks the virtual clock of a simulation', () => {
    seq = 0;
    const s = applyEvents(initialState({ status: 'running' }, [{ id: 'a', kind: 'action' }]), [
      ev('node.started', 'a', 1, { virtualAt: '2026-12-01T10:00:00Z' }),
      ev('node.retry.scheduled', 'a', 1, { delayMs: 60000, virtualAt: '2026-12-01T10:00:05Z' }),
      ev('node.started', 'a', 2, { virtualAt: '2026-12-01T10:01:05Z' }),
    ]);
    expect(s.virtualNow).toBe('2026-12-01T10:01:05Z');
    expect(virtualElapsedMs(s)).toBe(65000);
    expect(s.nodes.a.virtualAt).toBe('2026-12-01T10:01:05Z');
  });

  it('settles a closed run as the API does: open nodes become cancelled RUN_CLOSED', () => {
    seq = 0;
    let s = initialState({ status: 'running' }, [{ id: 'a', kind: 'action' }, { id: 'b', kind: 'output' }]);
    s = applyEvents(s, [ev('node.started', 'a', 1), ev('node.completed', 'a', 1, { port: 'out' }), ev('node.started', 'b', 1)]);
    expect(settle(s, 'running')).toBe(s);
    const closed = settle(s, 'failed');
    expect(closed.status).toBe('failed');
    expect(closed.nodes.a.status).toBe('succeeded');
    expect(closed.nodes.b).toMatchObject({ status: 'cancelled', reason: 'RUN_CLOSED' });
  });

  it('falls back to the API projection when the log is gone', () => {
    const run = {
      runId: 'r', status: 'succeeded',
      nodes: [{ id: 'a', kind: 'action', status: 'succeeded', attempt: 2, port: 'out' }],
    } as unknown as Run;
    const s = fromProjection(run);
    expect(s.nodes.a).toMatchObject({ status: 'succeeded', attempt: 2, port: 'out' });
  });
});

describe('throttled runs', () => {
  it('moves a throttled run to queued when admitted, then running', () => {
    seq = 0;
    let s = initialState({ status: 'throttled' }, [{ id: 'a', kind: 'action' }]);
    expect(s.status).toBe('throttled');
    s = applyEvents(s, [ev('run.throttled', undefined, undefined, { position: 2, reason: 'WORKFLOW_CONCURRENCY' })]);
    expect(s.status).toBe('throttled');
    expect(s.nodes.a.status).toBe('pending');
    s = applyEvents(s, [ev('run.admitted', undefined, undefined, { waitedMs: 1500 })]);
    expect(s.status).toBe('queued');
    s = applyEvents(s, [ev('run.started'), ev('node.started', 'a', 1)]);
    expect(s.status).toBe('running');
    expect(s.nodes.a.status).toBe('running');
  });

  it('cancels a throttled run that never started', () => {
    seq = 0;
    let s = initialState({ status: 'throttled' }, [{ id: 'a', kind: 'action' }]);
    s = applyEvents(s, [
      ev('run.throttled', undefined, undefined, { position: 1 }),
      ev('run.cancelled', undefined, undefined, { runError: { code: 'CANCELLED', message: 'cancelled while it waited for a slot' } }),
    ]);
    s = settle(s, 'cancelled');
    expect(s.status).toBe('cancelled');
    expect(s.error?.code).toBe('CANCELLED');
    expect(s.nodes.a.status).toBe('cancelled');
  });

  it('labels a throttled run with its place in the queue', () => {
    expect(runStatusLabel('throttled', 3)).toBe('throttled #3');
    expect(runStatusLabel('throttled')).toBe('throttled');
    expect(runStatusLabel('running', 3)).toBe('running');
  });
});

describe('approvals', () => {
  const ev = (seq: number, type: string, nodeId: string, data: Record<string, unknown> = {}): RunEvent => ({
    seq, type, nodeId, attempt: 1, data, at: `2026-12-01T10:00:0${seq}Z`, schemaVersion: 1, prevHash: '', hash: '',
  });
  const base = initialState({ status: 'running' }, [{ id: 'ok', kind: 'approval' }, { id: 'ag', kind: 'agent' }]);

  it('shows a wait, then who decided', () => {
    let s = applyEvents(base, [
      ev(1, 'node.started', 'ok'),
      ev(2, 'node.approval.requested', 'ok', { request: 1, timeoutMs: 3600000, deadlineAt: '2026-12-01T11:00:00Z' }),
      ev(3, 'node.started', 'ag'),
      ev(4, 'node.approval.requested', 'ag', { request: 1, timeoutMs: 60000, call: { ordinal: 2, tool: 'workspace.notes.write@1' } }),
    ]);
    expect(s.nodes.ok.status).toBe('awaiting_approval');
    expect(s.nodes.ok.approval).toMatchObject({ request: 1, status: 'pending', deadlineAt: '2026-12-01T11:00:00Z' });
    expect(awaitingApproval(s).map((n) => n.id)).toEqual(['ok', 'ag']);
    s = applyEvents(s, [
      ev(5, 'node.approval.decided', 'ag', { request: 1, decision: 'reject', actor: { kind: 'operator', identity: '42@ops' }, comment: 'no' }),
      ev(6, 'node.approval.timed_out', 'ok', { request: 1 }),
      ev(7, 'node.completed', 'ok', { port: 'timedOut' }),
    ]);
    expect(s.nodes.ag.status).toBe('running');
    expect(s.nodes.ag.approval).toMatchObject({ status: 'rejected', actor: { kind: 'operator' }, comment: 'no' });
    expect(s.nodes.ok.status).toBe('succeeded');
    expect(s.nodes.ok.approval?.status).toBe('timed_out');
    expect(awaitingApproval(s)).toEqual([]);
    expect(base.nodes.ok.approval).toBeUndefined();
  });

  it('a wait the run ended shows cancelled', () => {
    const s = applyEvents(base, [ev(1, 'node.approval.requested', 'ok', { request: 1, timeoutMs: 1000 })]);
    const closed = settle(s, 'cancelled');
    expect(closed.nodes.ok.status).toBe('cancelled');
    expect(closed.nodes.ok.approval?.status).toBe('cancelled');
    expect(s.nodes.ok.approval?.status).toBe('pending');
    expect(STATUS_LABEL.awaiting_approval).toBe('awaiting approval');
  });
});
