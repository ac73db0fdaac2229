// The workflow views and the runs list.

import { useEffect, useMemo, useState } from 'react';
import type { ApiError } from './api';
import { GraphList, GraphView } from './graphview';
import { NodePanel } from './nodepanel';
import { WorkflowReplays } from './replaypage';
import { runStatusLabel } from './runstate';
import type { Route } from './router';
import type { Graph, Page, RevisionDetail, Run, WorkflowDetail, WorkflowLimits, WorkflowSummary } from './types';
import {
  asApiError,
  Empty,
  ErrorState,
  formatDuration,
  formatTime,
  Link,
  Loaded,
  Loading,
  ModeBadge,
  shortId,
  StatusBadge,
  useLoad,
  useSession,
} from './ui';

export function WorkflowsPage() {
  const { client } = useSession();
  const [cursor, setCursor] = useState<string | null>(null);
  const [load, reload] = useLoad(() => client.listWorkflows(cursor), [cursor]);
  return (
    <div className="page">
      <div className="page-head">
        <h1>Workflows</h1>
        <Link className="btn btn-primary" to={{ name: 'new' }}>
          New workflow
        </Link>
      </div>
      <Loaded load={load} what="workflows" retry={reload}>
        {(page: Page<WorkflowSummary>) =>
          page.items.length === 0 && !cursor ? (
            <Empty title="No workflows yet">
              Push one with <code>weft push FILE.yaml --key KEY</code> and publish it with <code>weft publish KEY</code>;
              it appears here.
            </Empty>
          ) : (
            <>
              <table className="table" data-testid="workflow-list">
                <thead>
                  <tr>
                    <th>Workflow</th>
                    <th>Latest revision</th>
                    <th>Draft</th>
                    <th>Last runs</th>
                  </tr>
                </thead>
                <tbody>
                  {page.items.map((w) => (
                    <tr key={w.key}>
                      <td>
                        <Link to={{ name: 'workflow', key: w.key }}>
                          <strong>{w.key}</strong>
                        </Link>
                      </td>
                      <td>
                        {w.publishedRevision ? (
                          <Link to={{ name: 'revision', key: w.key, revision: w.publishedRevision }}>r{w.publishedRevision}</Link>
                        ) : (
                          <span className="muted">not published</span>
                        )}
                      </td>
                      <td>
                        r{w.draftRevision} <span className="muted">· {formatTime(w.updatedAt)}</span>
                      </td>
                      <td>
                        <LastRuns workflowKey={w.key} />
                      </td>
                    </tr>
                  ))}
                </tbody>
              </table>
              <div className="pager">
                {cursor && (
                  <button type="button" className="btn" onClick={() => setCursor(null)}>
                    First page
                  </button>
                )}
                {page.nextCursor && (
                  <button type="button" className="btn" onClick={() => setCursor(page.nextCursor)}>
                    Next page
                  </button>
                )}
              </div>
            </>
          )
        }
      </Loaded>
    </div>
  );
}

/** The latest runs of a workflow as status dots (nothing without runs.read). */
function LastRuns({ workflowKey }: { workflowKey: string }) {
  const { client } = useSession();
  const [runs, setRuns] = useState<Run[] | null | 'denied'>(null);
  useEffect(() => {
    let live = true;
    client.listRuns({ workflowKey, limit: 5 }).then(
      (p) => live && setRuns(p.items),
      (e: unknown) => live && setRuns(asApiError(e).status === 403 ? 'denied' : []),
    );
    return () => {
      live = false;
    };
  }, [client, workflowKey]);
  if (runs === null) return <span className="muted">…</span>;
  if (runs === 'denied') return <span className="muted" title="needs runs.read">—</span>;
  if (runs.length === 0) return <span className="muted">none</span>;
  return (
    <span className="dots">
      {runs.map((r) => (
        <Link key={r.runId} to={{ name: 'run', runId: r.runId }} className={`dot status-${r.status}`} title={`${r.status} · ${formatTime(r.createdAt)}`}>
          <span className="sr-only">{r.status}</span>
        </Link>
      ))}
      <Link to={{ name: 'runs', filter: { workflowKey } }} className="muted small">
        all
      </Link>
    </span>
  );
}

/** limitsText renders a workflow's limits, or null when it has none. */
export function limitsText(l: WorkflowLimits): string | null {
  const parts: string[] = [];
  if (l.maxConcurrentRuns !== null) parts.push(`at most ${l.maxConcurrentRuns} at once`);
  if (l.maxStartsPerMinute !== null) parts.push(`${l.maxStartsPerMinute} starts/min`);
  if (l.budget.maxTokens !== null) parts.push(`budget ${l.budget.maxTokens} tokens`);
  if (l.budget.maxCostUsd !== null) parts.push(`budget $${l.budget.maxCostUsd}`);
  return parts.length ? parts.join(', ') : null;
}

function LimitsFacts({ limits }: { limits: WorkflowLimits }) {
  const text = limitsText(limits);
  if (!text && limits.throttled === 0) return null;
  return (
    <span data-testid="workflow-limits">
      limits: {text ?? 'none'} · {limits.running} running
      {limits.throttled > 0 && (
        <>
          ,{' '}
          <Link to={{ name: 'runs', filter: { workflowKey: limits.workflowKey, status: 'throttled' } }}>{limits.throttled} throttled</Link>
        </>
      )}
    </span>
  );
}

export function WorkflowPage({ workflowKey }: { workflowKey: string }) {
  const { client } = useSession();
  const [load, reload] = useLoad(async () => {
    const w = await client.getWorkflow(workflowKey);
    let rev: RevisionDetail | null = null;
    if (w.publishedRevision) rev = await client.getRevision(workflowKey, w.publishedRevision);
    return { w, rev };
  }, [workflowKey]);
  return (
    <div className="page">
      <Loaded load={load} what="workflow" retry={reload}>
        {({ w, rev }: { w: WorkflowDetail; rev: RevisionDetail | null }) => (
          <>
            <div className="page-head">
              <div>
                <div className="crumbs">
                  <Link to={{ name: 'workflows' }}>Workflows</Link> /
                </div>
                <h1>{w.key}</h1>
                <div className="facts">
                  <span>
                    draft r{w.draft.revision} saved by {w.draft.savedBy} · {formatTime(w.draft.savedAt)}
                  </span>
                  {w.published ? (
                    <span>
                      published{' '}
                      <Link to={{ name: 'revision', key: w.key, revision: w.published.revision }}>r{w.published.revision}</Link> by{' '}
                      {w.published.publishedBy} · {formatTime(w.published.publishedAt)}
                    </span>
                  ) : (
                    <span className="badge">not published</span>
                  )}
                  {w.limits && <LimitsFacts limits={w.limits} />}
                </div>
              </div>
              <div className="editor-actions">
                <Link className="btn btn-primary" to={{ name: 'edit', key: w.key }}>
                  Edit draft
                </Link>
                <Link className="btn" to={{ name: 'runs', filter: { workflowKey: w.key } }}>
                  Runs of {w.key}
                </Link>
              </div>
            </div>
            {w.publishedRevision && w.publishedRevision > 1 && (
              <div className="revisions">
                Revisions:{' '}
                {Array.from({ length: w.publishedRevision }, (_, i) => w.publishedRevision! - i).map((n) => (
                  <Link key={n} to={{ name: 'revision', key: w.key, revision: n }} className="chip">
                    r{n}
                  </Link>
                ))}
              </div>
            )}
            {rev ? (
              <>
                <h2>
                  Latest revision r{rev.revision}{' '}
                  {w.draft.revision !== rev.draftRevision && <span className="muted small">(draft r{w.draft.revision} is newer)</span>}
                </h2>
                <RevisionGraph rev={rev} />
              </>
            ) : (
              <>
                <h2>
                  Draft r{w.draft.revision} <span className="muted small">not published: no compiled order or permissions yet</span>
                </h2>
                <GraphWithPanel graph={w.draft.graph} />
              </>
            )}
            <WorkflowReplays workflowKey={w.key} />
            <h2>Recent runs</h2>
            <RunsTable filter={{ workflowKey: w.key }} limit={10} compact />
          </>
        )}
      </Loaded>
    </div>
  );
}

export function RevisionPage({ workflowKey, revision }: { workflowKey: string; revision: number }) {
  const { client } = useSession();
  const [load, reload] = useLoad(() => client.getRevision(workflowKey, revision), [workflowKey, revision]);
  return (
    <div className="page">
      <Loaded load={load} what="revision" retry={reload}>
        {(rev: RevisionDetail) => (
          <>
            <div className="page-head">
              <div>
                <div className="crumbs">
                  <Link to={{ name: 'workflows' }}>Workflows</Link> / <Link to={{ name: 'workflow', key: rev.key }}>{rev.key}</Link> /
                </div>
                <h1 data-testid="revision-title">
                  {rev.key} <span className="muted">r{rev.revision}</span>
                </h1>
                <div className="facts">
                  <span>
                    published by {rev.publishedBy} · {formatTime(rev.publishedAt)} from draft r{rev.draftRevision}
                  </span>
                  <span title={rev.checksum}>
                    checksum <code>{rev.checksum.slice(0, 12)}</code>
                  </span>
                  <span>≤ {rev.estimatedHistoryEvents} history events</span>
                </div>
                <div className="facts">
                  <span>
                    permissions:{' '}
                    {rev.permissions.length ? rev.permissions.map((p) => <code key={p} className="perm">{p}</code>) : 'none'}
                  </span>
                </div>
              </div>
              <Link className="btn" to={{ name: 'runs', filter: { workflowKey: rev.key } }}>
                Runs
              </Link>
            </div>
            <RevisionGraph rev={rev} />
          </>
        )}
      </Loaded>
    </div>
  );
}

function RevisionGraph({ rev }: { rev: RevisionDetail }) {
  return (
    <>
      <div className="order" data-testid="compiled-order">
        <span className="muted">compiled order</span>{' '}
        {rev.order.map((id, i) => (
          <span key={id} className="order-step">
            {i > 0 && <span className="arrow">→</span>}
            <code>{id}</code>
          </span>
        ))}
      </div>
      <GraphWithPanel
        graph={rev.graph}
        order={rev.order}
        nodePermissions={rev.nodePermissions ?? {}}
        actions={rev.dependencies.actions}
        agents={rev.dependencies.agents}
      />
    </>
  );
}

function GraphWithPanel({
  graph,
  order,
  nodePermissions,
  actions,
  agents,
}: {
  graph: Graph;
  order?: string[];
  nodePermissions?: Record<string, string[]>;
  actions?: RevisionDetail['dependencies']['actions'];
  agents?: RevisionDetail['dependencies']['agents'];
}) {
  const { narrow } = useSession();
  const [selected, setSelected] = useState<string | null>(null);
  const node = graph.nodes.find((n) => n.id === selected);
  if (narrow) return <GraphList graph={graph} order={order} />;
  return (
    <div className="graph-layout">
      <GraphView graph={graph} order={order} selected={selected} onSelect={setSelected} />
      {node ? (
        <NodePanel
          node={node}
          graph={graph}
          permissions={nodePermissions ? nodePermissions[node.id] ?? [] : undefined}
          actions={actions}
          agents={agents}
          onClose={() => setSelected(null)}
        />
      ) : (
        <aside className="panel panel-hint">Select a node to see its mapping, pinned action or agent, retry, timeout and permissions.</aside>
      )}
    </div>
  );
}

const STATUSES = ['throttled', 'queued', 'running', 'succeeded', 'failed', 'cancelled'];
const MODES = ['live', 'simulation'];

export function RunsPage({ filter }: { filter: { workflowKey?: string; status?: string; mode?: string } }) {
  const { navigate, client } = useSession();
  const set = (k: 'workflowKey' | 'status' | 'mode', v: string) => {
    const next: Route = { name: 'runs', filter: { ...filter, [k]: v || undefined } };
    navigate(next, { replace: true });
  };
  const [keys, setKeys] = useState<string[] | null>(null);
  useEffect(() => {
    let live = true;
    client.listWorkflows(null, 200).then(
      (p) => live && setKeys(p.items.map((w) => w.key)),
      () => live && setKeys(null),
    );
    return () => {
      live = false;
    };
  }, [client]);
  return (
    <div className="page">
      <div className="page-head">
        <h1>Runs</h1>
      </div>
      <form className="filters" data-testid="run-filters" onSubmit={(e) => e.preventDefault()}>
        <label>
          Workflow
          {keys ? (
            <select value={filter.workflowKey ?? ''} onChange={(e) => set('workflowKey', e.target.value)} name="workflowKey">
              <option value="">all</option>
              {(filter.workflowKey && !keys.includes(filter.workflowKey) ? [filter.workflowKey, ...keys] : keys).map((k) => (
                <option key={k} value={k}>
                  {k}
                </option>
              ))}
            </select>
          ) : (
            <input
              name="workflowKey"
              defaultValue={filter.workflowKey ?? ''}
              placeholder="key"
              onBlur={(e) => set('workflowKey', e.target.value.trim())}
              onKeyDown={(e) => e.key === 'Enter' && set('workflowKey', (e.target as HTMLInputElement).value.trim())}
            />
          )}
        </label>
        <label>
          Status
          <select value={filter.status ?? ''} onChange={(e) => set('status', e.target.value)} name="status">
            <option value="">all</option>
            {STATUSES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
        <label>
          Mode
          <select value={filter.mode ?? ''} onChange={(e) => set('mode', e.target.value)} name="mode">
            <option value="">all</option>
            {MODES.map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
          </select>
        </label>
      </form>
      <RunsTable filter={filter} limit={50} />
    </div>
  );
}

function RunsTable({ filter, limit, compact }: { filter: { workflowKey?: string; status?: string; mode?: string }; limit: number; compact?: boolean }) {
  const { client, signOut } = useSession();
  const [rows, setRows] = useState<Run[] | null>(null);
  const [next, setNext] = useState<string | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [more, setMore] = useState(false);
  const key = JSON.stringify(filter);
  const f = useMemo(() => filter, [key]); // eslint-disable-line react-hooks/exhaustive-deps
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    setRows(null);
    setError(null);
    client.listRuns({ ...f, limit }).then(
      (p) => {
        if (!live) return;
        setRows(p.items);
        setNext(p.nextCursor);
      },
      (e: unknown) => {
        if (!live) return;
        const err = asApiError(e);
        if (err.status === 401) signOut(err.message);
        setError(err);
      },
    );
    return () => {
      live = false;
    };
  }, [client, f, limit, signOut, tick]);
  if (error) return <ErrorState error={error} what="runs" retry={() => setTick((t) => t + 1)} />;
  if (!rows) return <Loading what="runs" />;
  if (rows.length === 0) {
    const filtered = Object.values(filter).some(Boolean);
    return (
      <Empty title={filtered ? 'No runs match these filters' : 'No runs yet'}>
        Start one with <code>weft run KEY --input '{'{…}'}'</code> or <code>POST /v1/workflows/KEY/runs</code>.
      </Empty>
    );
  }
  return (
    <>
      <table className={`table${compact ? ' compact' : ''}`} data-testid="run-list">
        <thead>
          <tr>
            <th>Run</th>
            <th>Workflow</th>
            <th>Status</th>
            <th>Mode</th>
            <th>Started</th>
            <th>Duration</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.runId} data-run-id={r.runId}>
              <td>
                <Link to={{ name: 'run', runId: r.runId }}>
                  <code>{shortId(r.runId)}</code>
                </Link>
              </td>
              <td>
                {r.workflowKey} <span className="muted">{r.revision ? `r${r.revision}` : `draft r${r.draftRevision ?? '?'}`}</span>
              </td>
              <td>
                <StatusBadge status={r.status} label={runStatusLabel(r.status, r.position)} />
              </td>
              <td>
                <ModeBadge mode={r.mode} />
              </td>
              <td>{formatTime(r.startedAt ?? r.createdAt)}</td>
              <td>{r.startedAt && r.finishedAt ? formatDuration(Date.parse(r.finishedAt) - Date.parse(r.startedAt)) : '—'}</td>
            </tr>
          ))}
        </tbody>
      </table>
      {next && !compact && (
        <div className="pager">
          <button
            type="button"
            className="btn"
            disabled={more}
            onClick={() => {
              setMore(true);
              client.listRuns({ ...filter, limit, cursor: next }).then(
                (p) => {
                  setRows((rs) => [...(rs ?? []), ...p.items]);
                  setNext(p.nextCursor);
                  setMore(false);
                },
                (e: unknown) => {
                  setError(asApiError(e));
                  setMore(false);
                },
              );
            }}
          >
            {more ? 'Loading…' : 'Load more'}
          </button>
        </div>
      )}
    </>
  );
}
