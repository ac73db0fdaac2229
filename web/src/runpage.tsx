// One run, live: drawn on its revision's graph, node states and edges from
// its events (read once from the stream's replay, then as they are
// appended), attempts and errors, the event list, usage and cost, Cancel,
// and the link to the Temporal Web UI. The page never polls: it follows
// GET /v1/runs/{id}/events/stream, and reads the run again once, when the
// stream says the run ended.

import { useCallback, useEffect, useMemo, useState } from 'react';
import { ApiError } from './api';
import { GraphList, GraphView } from './graphview';
import { NodePanel } from './nodepanel';
import { applyEvents, awaitingApproval, fromProjection, initialState, isTerminal, runStatusLabel, settle, virtualElapsedMs, type NodeView } from './runstate';
import type { Graph, RevisionDetail, Run, RunEvent } from './types';
import {
  asApiError,
  Denied,
  ErrorState,
  formatDuration,
  formatTime,
  Json,
  Link,
  Loading,
  ModeBadge,
  shortId,
  StatusBadge,
  useSession,
} from './ui';

type GraphSource =
  | { kind: 'revision'; rev: RevisionDetail }
  | { kind: 'draft'; graph: Graph }
  | { kind: 'none'; why: string };

type StreamState = 'connecting' | 'live' | 'reconnecting' | 'ended' | 'error';

export function RunPage({ runId }: { runId: string }) {
  const { client, signOut, narrow } = useSession();
  const [run, setRun] = useState<Run | null>(null);
  const [runError, setRunError] = useState<ApiError | null>(null);
  const [source, setSource] = useState<GraphSource | null>(null);
  const [events, setEvents] = useState<RunEvent[]>([]);
  const [stream, setStream] = useState<StreamState>('connecting');
  const [streamError, setStreamError] = useState<ApiError | null>(null);
  const [selected, setSelected] = useState<string | null>(null);
  const [tick, setTick] = useState(0);

  const fail = useCallback(
    (e: unknown) => {
      const err = asApiError(e);
      if (err.status === 401) signOut(err.message);
      return err;
    },
    [signOut],
  );

  // The run, then its graph.
  useEffect(() => {
    let live = true;
    setRun(null);
    setRunError(null);
    setSource(null);
    setEvents([]);
    client.getRun(runId).then(
      async (r) => {
        if (!live) return;
        setRun(r);
        setSource(await graphOf(r).catch((e: unknown) => ({ kind: 'none' as const, why: asApiError(e).message })));
      },
      (e: unknown) => live && setRunError(fail(e)),
    );
    return () => {
      live = false;
    };
    async function graphOf(r: Run): Promise<GraphSource> {
      try {
        if (r.revision > 0) return { kind: 'revision', rev: await client.getRevision(r.workflowKey, r.revision) };
        const w = await client.getWorkflow(r.workflowKey);
        if (w.draft.revision === r.draftRevision) return { kind: 'draft', graph: w.draft.graph };
        return { kind: 'none', why: `draft r${r.draftRevision} was edited since this simulation; its nodes are shown as the run recorded them` };
      } catch (e) {
        const err = asApiError(e);
        if (err.status === 403) return { kind: 'none', why: `drawing the graph needs ${err.missingScopes.join(', ') || 'workflows.read'}; nodes are listed as the run recorded them` };
        throw e;
      }
    }
  }, [client, runId, fail, tick]);

  // The event stream, once the run is known.
  const haveRun = run !== null;
  useEffect(() => {
    if (!haveRun) return;
    const ctl = new AbortController();
    setStream('connecting');
    setStreamError(null);
    client
      .streamRunEvents(
        runId,
        0,
        {
          onEvents: (evs) => setEvents((prev) => [...prev, ...evs]),
          onState: (ok) => setStream(ok ? 'live' : 'reconnecting'),
        },
        ctl.signal,
      )
      .then(
        async (end) => {
          if (!end || ctl.signal.aborted) return;
          setStream('ended');
          // Output, error, usage and timestamps live on the run row.
          try {
            setRun(await client.getRun(runId));
          } catch (e) {
            fail(e);
          }
        },
        (e: unknown) => {
          if (ctl.signal.aborted) return;
          setStream('error');
          setStreamError(fail(e));
        },
      );
    return () => ctl.abort();
  }, [client, runId, haveRun, fail]);

  const nodeList = useMemo(() => {
    if (source?.kind === 'revision') {
      const byId = new Map(source.rev.graph.nodes.map((n) => [n.id, n.kind]));
      return source.rev.order.map((id) => ({ id, kind: byId.get(id) ?? '' }));
    }
    if (source?.kind === 'draft') return source.graph.nodes.map((n) => ({ id: n.id, kind: n.kind }));
    return (run?.nodes ?? []).map((n) => ({ id: n.id, kind: n.kind }));
  }, [source, run]);

  const state = useMemo(() => {
    if (!run) return null;
    if (events.length === 0 && isTerminal(run.status) && stream === 'ended') return settle(fromProjection(run), run.status);
    return settle(applyEvents(initialState(run, nodeList), events), run.status);
  }, [run, nodeList, events, stream]);

  // A throttled run's place in its queue moves as runs ahead of it start:
  // read it again every few seconds until the run is admitted.
  const throttled = run?.status === 'throttled' && state?.status === 'throttled';
  useEffect(() => {
    if (!throttled) return;
    const id = window.setInterval(() => {
      client.getRun(runId).then(setRun, () => undefined);
    }, 5000);
    return () => window.clearInterval(id);
  }, [throttled, client, runId]);

  if (runError) return <div className="page"><ErrorState error={runError} what="run" retry={() => setTick((t) => t + 1)} /></div>;
  if (!run || !state || !source) return <div className="page"><Loading what="run" /></div>;

  const graph: Graph | null = source.kind === 'revision' ? source.rev.graph : source.kind === 'draft' ? source.graph : null;
  const order = source.kind === 'revision' ? source.rev.order : undefined;
  const status = state.status;
  const terminal = isTerminal(status);
  const sim = run.mode === 'simulation';
  const selectedNode = graph?.nodes.find((n) => n.id === selected);
  const listGraph: Graph = graph ?? {
    schemaVersion: 1,
    nodes: Object.values(state.nodes).map((n) => ({ id: n.id, kind: n.kind as Graph['nodes'][number]['kind'] })),
    edges: [],
  };
  const elapsed = virtualElapsedMs(state);

  return (
    <div className="page" data-testid="run-page" data-run-status={status} data-stream={stream}>
      <div className="page-head">
        <div>
          <div className="crumbs">
            <Link to={{ name: 'runs', filter: {} }}>Runs</Link> /
          </div>
          <h1>
            <span title={run.runId}>Run {shortId(run.runId)}</span>{' '}
            <StatusBadge status={status} label={runStatusLabel(status, status === 'throttled' ? run.position : undefined)} />{' '}
            <ModeBadge mode={run.mode} />{' '}
            {!terminal && stream === 'live' && (
              <span className="badge live" data-testid="live-badge">
                ● live
              </span>
            )}
            {stream === 'reconnecting' && <span className="badge">reconnecting…</span>}
          </h1>
          <div className="facts">
            <span>
              <Link to={run.revision ? { name: 'revision', key: run.workflowKey, revision: run.revision } : { name: 'workflow', key: run.workflowKey }}>
                {run.workflowKey} {run.revision ? `r${run.revision}` : `draft r${run.draftRevision ?? '?'}`}
              </Link>
            </span>
            <span>
              by {run.actor.name || run.actor.sub} via {run.origin.kind}
              {run.origin.kind === 'replay' && run.origin.id && (
                <>
                  {' '}
                  (<Link to={{ name: 'replay', replayId: run.origin.id }}>the replay's report</Link>)
                </>
              )}
            </span>
            <span>{run.startedAt ? `started ${formatTime(run.startedAt)}` : `enqueued ${formatTime(run.createdAt)}`}</span>
            {run.finishedAt && run.startedAt && <span>took {formatDuration(Date.parse(run.finishedAt) - Date.parse(run.startedAt))}</span>}
          </div>
          {sim && (
            <div className="sim-bar" data-testid="simulation-bar">
              Simulation: agents and actions returned fixtures; delays advanced a virtual clock.
              {state.virtualNow && (
                <>
                  {' '}
                  Virtual time <strong data-testid="virtual-time">{formatTime(state.virtualNow)}</strong>
                  {elapsed !== undefined && <> (+{formatDuration(elapsed)} virtual)</>}
                </>
              )}
            </div>
          )}
          {status === 'throttled' && (
            <div className="note" data-testid="throttled-note">
              Waiting for a slot under the workflow's or the tenant's limits
              {run.position ? <> (#{run.position} in the workflow's queue)</> : null}: it starts when a run ahead of it finishes.
              Cancelling it removes it from the queue; it never starts.
            </div>
          )}
          {state.cancelRequested && !terminal && <div className="note">Cancel requested: in-flight nodes are being asked to stop.</div>}
          {(run.error || state.error) && (
            <div className="error-box" data-testid="run-error">
              <code>{(run.error ?? state.error)?.code}</code> {(run.error ?? state.error)?.message}
              {(run.error ?? state.error)?.nodeId && <> (node {(run.error ?? state.error)?.nodeId})</>}
            </div>
          )}
        </div>
        <div className="actions">
          {run.temporal.uiUrl && status !== 'throttled' && (
            <a className="btn" href={run.temporal.uiUrl} target="_blank" rel="noreferrer noopener" data-testid="temporal-link">
              Temporal Web UI ↗
            </a>
          )}
          {!terminal && !narrow && <CancelButton runId={run.runId} requested={state.cancelRequested} />}
        </div>
      </div>

      {streamError && (streamError.status === 403 ? <Denied error={streamError} /> : <ErrorState error={streamError} what="the live events" />)}
      {!terminal && awaitingApproval(state).length > 0 && <Approvals runId={run.runId} waiting={awaitingApproval(state)} />}
      {source.kind === 'none' && <div className="note">{source.why}</div>}

      {narrow || !graph ? (
        <GraphList graph={listGraph} order={order} views={state.nodes} />
      ) : (
        <div className="graph-layout">
          <GraphView graph={graph} order={order} views={state.nodes} edges={state.edges} selected={selected} onSelect={setSelected} />
          {selectedNode ? (
            <NodePanel
              node={selectedNode}
              graph={graph}
              permissions={source.kind === 'revision' ? source.rev.nodePermissions?.[selectedNode.id] ?? [] : undefined}
              actions={source.kind === 'revision' ? source.rev.dependencies.actions : undefined}
              agents={source.kind === 'revision' ? source.rev.dependencies.agents : undefined}
              view={state.nodes[selectedNode.id]}
              events={events.filter((e) => e.nodeId === selectedNode.id)}
              onClose={() => setSelected(null)}
            />
          ) : (
            <aside className="panel panel-hint">Select a node to see its attempts, errors and events.</aside>
          )}
        </div>
      )}

      <div className="run-details">
        <section className="card">
          <h2>Usage and cost</h2>
          <Usage run={run} />
        </section>
        <section className="card">
          <h2>Input</h2>
          <Json value={run.input} />
          {run.output !== null && run.output !== undefined && (
            <>
              <h2>Output</h2>
              <Json value={run.output} />
            </>
          )}
        </section>
      </div>

      <section className="card">
        <h2>
          Events <span className="muted small">({events.length})</span>
        </h2>
        <EventList events={events} onSelectNode={narrow ? undefined : setSelected} />
      </section>
    </div>
  );
}

function Usage({ run }: { run: Run }) {
  const u = run.usage ?? {};
  const b = run.budget;
  const bounds = b ? [b.maxTokens !== null ? `${b.maxTokens} tokens` : '', b.maxCostUsd !== null ? `$${b.maxCostUsd}` : ''].filter(Boolean) : [];
  const budget =
    bounds.length > 0 ? (
      <>
        <dt>budget</dt>
        <dd data-testid="budget">{bounds.join(', ')}</dd>
      </>
    ) : null;
  if (!u.calls) {
    return (
      <>
        <div className="muted" data-testid="usage">No agent calls: no tokens used, no cost.</div>
        {budget && <dl className="kv">{budget}</dl>}
      </>
    );
  }
  return (
    <dl className="kv" data-testid="usage">
      <dt>agent calls</dt>
      <dd>{u.calls}</dd>
      <dt>tokens</dt>
      <dd>
        {u.totalTokens ?? 0} ({u.inputTokens ?? 0} in, {u.outputTokens ?? 0} out)
      </dd>
      <dt>cost</dt>
      <dd>${(u.costUsd ?? 0).toFixed(4)}</dd>
      {budget}
    </dl>
  );
}

function CancelButton({ runId, requested }: { runId: string; requested: boolean }) {
  const { client, signOut } = useSession();
  const [confirm, setConfirm] = useState(false);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const [sent, setSent] = useState(false);
  if (requested || sent) return <span className="badge" data-testid="cancel-requested">cancel requested</span>;
  if (!confirm) {
    return (
      <button type="button" className="btn btn-danger" data-testid="cancel-run" onClick={() => setConfirm(true)}>
        Cancel run
      </button>
    );
  }
  return (
    <span className="confirm">
      <span>Cancel this run?</span>
      <button
        type="button"
        className="btn btn-danger"
        data-testid="confirm-cancel"
        disabled={busy}
        onClick={() => {
          setBusy(true);
          setError(null);
          client.cancelRun(runId).then(
            () => setSent(true),
            (e: unknown) => {
              const err = asApiError(e);
              if (err.status === 401) signOut(err.message);
              setError(err);
              setBusy(false);
            },
          );
        }}
      >
        Yes, cancel
      </button>
      <button type="button" className="btn" onClick={() => setConfirm(false)} disabled={busy}>
        Keep running
      </button>
      {error && (
        <span className="error-inline" role="alert">
          {error.status === 403 ? `Denied: needs ${error.missingScopes.join(', ') || 'runs.cancel'}` : error.message}
        </span>
      )}
    </span>
  );
}

// Approvals lists what the run waits for a person to decide, each with
// Approve and Reject (POST /v1/runs/{id}/approvals/{nodeId}; the API
// decides who may). The decision shows up through the event stream.
function Approvals({ runId, waiting }: { runId: string; waiting: NodeView[] }) {
  return (
    <section className="card approvals" data-testid="approvals">
      <h2>Waiting for a decision</h2>
      {waiting.map((n) => (
        <ApprovalRow key={`${n.id}/${n.approval?.request}`} runId={runId} node={n} />
      ))}
    </section>
  );
}

function ApprovalRow({ runId, node }: { runId: string; node: NodeView }) {
  const { client, signOut } = useSession();
  const [comment, setComment] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<ApiError | null>(null);
  const a = node.approval!;
  const decide = (decision: 'approve' | 'reject') => {
    setBusy(true);
    setError(null);
    client.decideApproval(runId, node.id, decision, comment.trim() || undefined).then(
      () => setBusy(false),
      (e: unknown) => {
        const err = asApiError(e);
        if (err.status === 401) signOut(err.message);
        setError(err);
        setBusy(false);
      },
    );
  };
  return (
    <div className="approval-row" data-testid={`approval-${node.id}`}>
      <strong>{node.id}</strong>
      <span className="muted">
        {a.call ? (
          <>
            tool call {a.call.ordinal}: <code>{a.call.tool}</code>
          </>
        ) : (
          'approval node'
        )}
        {a.deadlineAt && <> · times out {formatTime(a.deadlineAt)}</>}
      </span>
      <input
        type="text"
        placeholder="comment (optional)"
        maxLength={1000}
        value={comment}
        onChange={(e) => setComment(e.target.value)}
        aria-label={`comment on ${node.id}`}
      />
      <button type="button" className="btn" data-testid={`approve-${node.id}`} disabled={busy} onClick={() => decide('approve')}>
        Approve
      </button>
      <button type="button" className="btn btn-danger" data-testid={`reject-${node.id}`} disabled={busy} onClick={() => decide('reject')}>
        Reject
      </button>
      {a.call?.input !== undefined && <Json value={a.call.input} />}
      {error && (
        <span className="error-inline" role="alert" data-testid={`approval-error-${node.id}`}>
          {error.status === 403 ? `Denied: needs ${error.missingScopes.join(', ') || 'runs.approve'}` : `${error.code}: ${error.message}`}
        </span>
      )}
    </div>
  );
}

function EventList({ events, onSelectNode }: { events: RunEvent[]; onSelectNode?(id: string): void }) {
  const [open, setOpen] = useState<Set<number>>(new Set());
  const [all, setAll] = useState(false);
  const shown = all || events.length <= 300 ? events : events.slice(events.length - 300);
  if (events.length === 0) return <div className="muted">No events yet.</div>;
  return (
    <>
      {shown.length < events.length && (
        <button type="button" className="btn" onClick={() => setAll(true)}>
          Show all {events.length} events (the last 300 are shown)
        </button>
      )}
      <table className="table events" data-testid="event-list">
        <thead>
          <tr>
            <th>#</th>
            <th>at</th>
            <th>event</th>
            <th>node</th>
            <th>attempt</th>
            <th>data</th>
          </tr>
        </thead>
        <tbody>
          {shown.map((e) => {
            const isOpen = open.has(e.seq);
            return (
              <EventRow
                key={e.seq}
                e={e}
                open={isOpen}
                toggle={() =>
                  setOpen((s) => {
                    const n = new Set(s);
                    if (isOpen) n.delete(e.seq);
                    else n.add(e.seq);
                    return n;
                  })
                }
                onSelectNode={onSelectNode}
              />
            );
          })}
        </tbody>
      </table>
    </>
  );
}

function EventRow({ e, open, toggle, onSelectNode }: { e: RunEvent; open: boolean; toggle(): void; onSelectNode?(id: string): void }) {
  const virtualAt = typeof e.data?.virtualAt === 'string' ? e.data.virtualAt : undefined;
  return (
    <>
      <tr className={`ev ev-${e.type.split('.')[0]}${open ? ' open' : ''}`} data-seq={e.seq} data-type={e.type} onClick={toggle}>
        <td>
          <code>{e.seq}</code>
        </td>
        <td title={e.at}>
          {formatTime(e.at)}
          {virtualAt && <div className="muted small">virtual {formatTime(virtualAt)}</div>}
        </td>
        <td>
          <span className="ev-type">{e.type}</span>
        </td>
        <td>
          {e.nodeId &&
            (onSelectNode ? (
              <button
                type="button"
                className="link"
                onClick={(ev) => {
                  ev.stopPropagation();
                  onSelectNode(e.nodeId!);
                }}
              >
                {e.nodeId}
              </button>
            ) : (
              e.nodeId
            ))}
        </td>
        <td>{e.attempt ?? ''}</td>
        <td>
          <div className="ev-data-preview">{preview(e.data)}</div>
        </td>
      </tr>
      {open && (
        <tr className="ev-data">
          <td colSpan={6}>
            <Json value={e.data} />
          </td>
        </tr>
      )}
    </>
  );
}

function preview(data: Record<string, unknown> | undefined): string {
  if (!data || Object.keys(data).length === 0) return '';
  const s = JSON.stringify(data);
  return s.length > 140 ? s.slice(0, 139) + '…' : s;
}
