// The replay report: recorded live runs of a workflow replayed through a
// draft (POST /v1/workflows/{key}/replays, `weft replay`), one row per run
// with its verdict, what changed, and links to the recorded run and to its
// simulation. A running replay is read again until it is done.

import { useEffect, useState } from 'react';
import type { ApiError } from './api';
import { changedCount, changeParts, outcomeText, summaryText, verdictChip } from './replay';
import type { Replay } from './types';
import { asApiError, ErrorState, formatTime, Link, Loading, shortId, StatusBadge, useSession } from './ui';

/** How often a running replay is read again. */
const POLL_MS = 2000;

export function ReplayPage({ replayId }: { replayId: string }) {
  const { client, signOut } = useSession();
  const [replay, setReplay] = useState<Replay | null>(null);
  const [error, setError] = useState<ApiError | null>(null);
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const read = () => {
      client.getReplay(replayId).then(
        (r) => {
          if (!live) return;
          setReplay(r);
          setError(null);
          if (r.status !== 'done') timer = setTimeout(read, POLL_MS);
        },
        (e: unknown) => {
          if (!live) return;
          const err = asApiError(e);
          if (err.status === 401) signOut(err.message);
          setError(err);
        },
      );
    };
    read();
    return () => {
      live = false;
      if (timer) clearTimeout(timer);
    };
  }, [client, replayId, signOut, tick]);

  if (error && !replay) return <div className="page"><ErrorState error={error} what="replay" retry={() => setTick((t) => t + 1)} /></div>;
  if (!replay) return <div className="page"><Loading what="replay" /></div>;
  const runs = replay.runs ?? [];
  const changed = changedCount(replay);
  const done = replay.status === 'done';
  return (
    <div className="page" data-testid="replay-page" data-replay-status={replay.status}>
      <div className="page-head">
        <div>
          <div className="crumbs">
            <Link to={{ name: 'workflows' }}>Workflows</Link> / <Link to={{ name: 'workflow', key: replay.workflowKey }}>{replay.workflowKey}</Link> /
          </div>
          <h1>
            <span title={replay.replayId}>Replay through draft r{replay.draftRevision}</span>{' '}
            {done ? (
              <span className={`badge verdict-${changed ? 'changed' : 'same'}`} data-testid="replay-outcome">
                {changed ? `${changed} would change` : 'nothing changes'}
              </span>
            ) : (
              <span className="badge live" data-testid="replay-running">
                ● replaying
              </span>
            )}
          </h1>
          <div className="facts">
            <span data-testid="replay-summary">
              {runs.length} live run{runs.length === 1 ? '' : 's'}: {summaryText(replay)}
            </span>
            <span>started {formatTime(replay.createdAt)}</span>
            {replay.finishedAt && <span>done {formatTime(replay.finishedAt)}</span>}
          </div>
          <div className="sim-bar">
            Each run's input went through draft r{replay.draftRevision} in simulation, its agents, actions and approvals answering
            what they answered live. Nothing live was called and nothing was published.
          </div>
          {error && (
            <div className="error-inline" role="alert">
              Could not read the replay again: {error.message} ({error.code})
            </div>
          )}
        </div>
      </div>
      {runs.length === 0 ? (
        <div className="state state-empty" data-testid="state-empty">
          <div className="state-title">No live runs to replay</div>
          <div className="state-body">The workflow had no live run that ended when the replay started.</div>
        </div>
      ) : (
        <table className="table" data-testid="replay-runs">
          <thead>
            <tr>
              <th>Recorded run</th>
              <th>Recorded</th>
              <th>Simulated</th>
              <th>Verdict</th>
              <th>Changes</th>
              <th>Simulation</th>
            </tr>
          </thead>
          <tbody>
            {runs.map((run) => {
              const chip = verdictChip(run.verdict);
              const parts = changeParts(run);
              return (
                <tr key={run.runId} data-run-id={run.runId} data-verdict={run.verdict}>
                  <td>
                    <Link to={{ name: 'run', runId: run.runId }} title={run.runId}>
                      <code>{shortId(run.runId)}</code>
                    </Link>
                  </td>
                  <td>{run.recordedStatus ? <StatusBadge status={run.recordedStatus} /> : '—'}</td>
                  <td>{run.simulatedStatus ? <StatusBadge status={run.simulatedStatus} /> : '—'}</td>
                  <td>
                    <span className={`badge verdict-${chip.tone}`} data-testid="verdict">
                      {chip.text}
                    </span>
                  </td>
                  <td className="changes">
                    {parts.length === 0 ? <span className="muted">—</span> : parts.map((p) => <div key={p}>{p}</div>)}
                  </td>
                  <td>
                    {run.simulationRunId ? (
                      <Link to={{ name: 'run', runId: run.simulationRunId }} title={run.simulationRunId}>
                        <code>{shortId(run.simulationRunId)}</code>
                      </Link>
                    ) : (
                      <span className="muted">—</span>
                    )}
                  </td>
                </tr>
              );
            })}
          </tbody>
        </table>
      )}
    </div>
  );
}

/**
 * A workflow's latest replays, each linking to its report; nothing at all
 * when it has none or the token may not read them.
 */
export function WorkflowReplays({ workflowKey }: { workflowKey: string }) {
  const { client } = useSession();
  const [replays, setReplays] = useState<Replay[] | null>(null);
  useEffect(() => {
    let live = true;
    client.listReplays(workflowKey, 5).then(
      (p) => live && setReplays(p.items),
      () => live && setReplays([]),
    );
    return () => {
      live = false;
    };
  }, [client, workflowKey]);
  if (!replays || replays.length === 0) return null;
  return (
    <>
      <h2>Replays</h2>
      <table className="table compact" data-testid="workflow-replays">
        <thead>
          <tr>
            <th>Replay</th>
            <th>Draft</th>
            <th>Outcome</th>
            <th>Started</th>
          </tr>
        </thead>
        <tbody>
          {replays.map((r) => {
            const o = outcomeText(r);
            return (
              <tr key={r.replayId}>
                <td>
                  <Link to={{ name: 'replay', replayId: r.replayId }} title={r.replayId}>
                    <code>{shortId(r.replayId.replace(/^rpl_/, ''))}</code>
                  </Link>
                </td>
                <td>r{r.draftRevision}</td>
                <td>
                  <span className={`badge verdict-${o.tone}`}>{o.text}</span>
                </td>
                <td>{formatTime(r.createdAt)}</td>
              </tr>
            );
          })}
        </tbody>
      </table>
    </>
  );
}
