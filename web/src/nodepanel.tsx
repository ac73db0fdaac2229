// The side panel of a selected node: what the revision says about it
// (ports and schemas, mapping, the pinned action or agent revision, retry,
// timeout, required permissions) and, in a run, what happened to it.

import { KIND_LABEL, nodeSubtitle } from './graphview';
import { portsOf } from './layout';
import type { NodeView } from './runstate';
import type { ActionContract, AgentContract, Graph, GraphNode, RunEvent } from './types';
import { formatTime, Json, StatusBadge } from './ui';

export interface NodePanelProps {
  node: GraphNode;
  graph: Graph;
  permissions?: string[] | null;
  actions?: ActionContract[];
  agents?: AgentContract[];
  view?: NodeView;
  events?: RunEvent[];
  onClose(): void;
}

export function NodePanel({ node, graph, permissions, actions, agents, view, events, onClose }: NodePanelProps) {
  const { inputs, outputs } = portsOf(node);
  const contract = node.action ? actions?.find((a) => a.id === node.action!.id && a.version === node.action!.version) : undefined;
  const agent = node.agent ? agents?.find((a) => a.key === node.agent!.key && a.revision === node.agent!.revision) : undefined;
  const schema = (name: string) => (name !== 'any' ? graph.schemas?.[name] : undefined);
  return (
    <aside className="panel" data-testid="node-panel" aria-label={`node ${node.id}`}>
      <div className="panel-head">
        <div>
          <div className="panel-kind">{KIND_LABEL[node.kind] ?? node.kind}</div>
          <h3 className="panel-title">{node.id}</h3>
          {nodeSubtitle(node) && <div className="panel-sub">{nodeSubtitle(node)}</div>}
        </div>
        <button type="button" className="btn btn-quiet" onClick={onClose} aria-label="close">
          ×
        </button>
      </div>

      {view && (
        <section>
          <h4>In this run</h4>
          <dl className="kv">
            <dt>status</dt>
            <dd>
              <StatusBadge status={view.status} />
              {view.reason && <code className="reason">{view.reason}</code>}
            </dd>
            <dt>attempts</dt>
            <dd>{view.attempt}</dd>
            {view.port && (
              <>
                <dt>fired</dt>
                <dd>
                  <code>{view.port}</code>
                </dd>
              </>
            )}
            {view.virtualAt && (
              <>
                <dt>virtual time</dt>
                <dd>{formatTime(view.virtualAt)}</dd>
              </>
            )}
            {view.approval && (
              <>
                <dt>approval</dt>
                <dd data-testid="approval-state">
                  request {view.approval.request} <code>{view.approval.status}</code>
                  {view.approval.call && <> · tool call {view.approval.call.ordinal} {view.approval.call.tool}</>}
                  {view.approval.actor && (
                    <>
                      {' '}
                      by {view.approval.actor.kind === 'operator'
                        ? `operator ${view.approval.actor.identity ?? ''}`
                        : view.approval.actor.name || view.approval.actor.sub || view.approval.actor.kind}
                    </>
                  )}
                  {view.approval.comment && <>: “{view.approval.comment}”</>}
                </dd>
              </>
            )}
          </dl>
          {view.error && <div className="error-box">{view.error}</div>}
          {view.attempts.some((a) => a.error) && (
            <ol className="attempts" data-testid="attempts">
              {view.attempts.map((a) => (
                <li key={a.attempt}>
                  <strong>attempt {a.attempt}</strong>
                  {a.error ? (
                    <>
                      {' '}
                      failed: <code>{a.error.type}</code> {a.error.message}
                      {a.retryable === false && <em> (not retryable)</em>}
                    </>
                  ) : (
                    ' —'
                  )}
                  {a.retryDelayMs !== undefined && <span className="muted"> · retried after {a.retryDelayMs} ms</span>}
                </li>
              ))}
            </ol>
          )}
          {view.recoveries.length > 0 && (
            <ul className="recoveries">
              {view.recoveries.map((r, i) => (
                <li key={i}>
                  <span className="badge recovered">recovered</span> attempt {r.attempt} re-dispatched
                  {r.type.endsWith('lease_lost') ? ' after its worker was lost' : ' after an infrastructure fault'}
                  {r.code && (
                    <>
                      {' '}
                      (<code>{r.code}</code>)
                    </>
                  )}
                  {r.redispatch !== undefined && `, re-dispatch ${r.redispatch}`} · {formatTime(r.at)}
                </li>
              ))}
            </ul>
          )}
          {events && events.length > 0 && (
            <details>
              <summary>{events.length} events of this node</summary>
              <ul className="mini-events">
                {events.map((e) => (
                  <li key={e.seq}>
                    <code>#{e.seq}</code> {e.type}
                    {e.attempt ? ` · attempt ${e.attempt}` : ''}
                  </li>
                ))}
              </ul>
            </details>
          )}
        </section>
      )}

      <section>
        <h4>Ports</h4>
        <table className="ports">
          <tbody>
            {inputs.map(([p, s]) => (
              <tr key={`in-${p}`}>
                <td>in</td>
                <td>
                  <code>{p}</code>
                </td>
                <td>{schema(s) ? <details><summary>{s}</summary><Json value={schema(s)} /></details> : s}</td>
              </tr>
            ))}
            {outputs.map(([p, s]) => (
              <tr key={`out-${p}`}>
                <td>out</td>
                <td>
                  <code>{p}</code>
                </td>
                <td>{schema(s) ? <details><summary>{s}</summary><Json value={schema(s)} /></details> : s}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>

      {node.expression && (
        <section>
          <h4>Expression ({node.language ?? 'cel/v1'})</h4>
          <pre className="json">{node.expression}</pre>
        </section>
      )}
      {node.schema !== undefined && node.kind === 'validator' && (
        <section>
          <h4>Validates against</h4>
          {typeof node.schema === 'string' ? <code>{node.schema}</code> : <Json value={node.schema} />}
        </section>
      )}
      {node.action && (
        <section>
          <h4>Pinned action</h4>
          <dl className="kv">
            <dt>action</dt>
            <dd>
              <code>
                {node.action.id}@{node.action.version}
              </code>
            </dd>
            {contract && (
              <>
                <dt>risk</dt>
                <dd>{contract.risk}</dd>
                {contract.timeoutMs !== undefined && (
                  <>
                    <dt>contract timeout</dt>
                    <dd>{contract.timeoutMs} ms</dd>
                  </>
                )}
              </>
            )}
          </dl>
        </section>
      )}
      {node.agent && (
        <section>
          <h4>Pinned agent revision</h4>
          <dl className="kv">
            <dt>agent</dt>
            <dd>
              <code>
                {node.agent.key} r{node.agent.revision}
              </code>
            </dd>
            {agent && typeof agent.hash === 'string' && (
              <>
                <dt>hash</dt>
                <dd>
                  <code>{agent.hash.slice(0, 12)}</code>
                </dd>
              </>
            )}
            {node.tools && (
              <>
                <dt>toolset</dt>
                <dd>{node.tools}</dd>
              </>
            )}
          </dl>
        </section>
      )}
      {node.mapping && Object.keys(node.mapping).length > 0 && (
        <section>
          <h4>Mapping</h4>
          <table className="mapping" data-testid="mapping">
            <tbody>
              {Object.entries(node.mapping)
                .sort(([a], [b]) => (a < b ? -1 : 1))
                .map(([field, m]) => (
                  <tr key={field}>
                    <td>
                      <code>{field}</code>
                    </td>
                    <td>
                      {m.pointer !== undefined && (
                        <>
                          pointer <code>{m.pointer}</code>
                        </>
                      )}
                      {m.template !== undefined && (
                        <>
                          template <code>{m.template}</code>
                          {m.bindings && (
                            <div className="muted">
                              {Object.entries(m.bindings).map(([k, v]) => (
                                <div key={k}>
                                  <code>{k}</code> ← <code>{v}</code>
                                </div>
                              ))}
                            </div>
                          )}
                        </>
                      )}
                      {'literal' in m && (
                        <>
                          literal <code>{JSON.stringify(m.literal)}</code>
                        </>
                      )}
                    </td>
                  </tr>
                ))}
            </tbody>
          </table>
        </section>
      )}
      <section>
        <h4>Execution</h4>
        <dl className="kv">
          <dt>retry</dt>
          <dd>
            {node.retry
              ? `${node.retry.maxAttempts ?? 1} attempts, ${node.retry.initialIntervalMs ?? 0} ms × ${node.retry.backoff ?? 1}${
                  node.retry.maxIntervalMs ? `, at most ${node.retry.maxIntervalMs} ms` : ''
                }`
              : 'one attempt'}
          </dd>
          <dt>timeout</dt>
          <dd>{node.timeoutMs ? `${node.timeoutMs} ms` : 'default'}</dd>
          <dt>permissions</dt>
          <dd data-testid="node-permissions">
            {permissions === undefined ? (
              <span className="muted">known once published</span>
            ) : permissions && permissions.length > 0 ? (
              permissions.map((p) => (
                <code key={p} className="perm">
                  {p}
                </code>
              ))
            ) : (
              'none'
            )}
          </dd>
        </dl>
      </section>
    </aside>
  );
}
