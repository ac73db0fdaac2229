// The editor: a workflow's latest draft on a canvas the user changes. The
// browser decides no graph rule: every edge is checked by the server before
// it is drawn (POST /v1/graphs/check), every change is checked the same way
// (unknown and forbidden variables, expression compile errors), and after
// each save the dry-run of the saved draft pins its issues to nodes, edges
// and fields. Node positions are saved beside the draft (the layout route),
// so moving a node creates no draft revision and no conflict.

import {
  Background,
  Controls,
  Handle,
  Position,
  ReactFlow,
  applyNodeChanges,
  type Connection,
  type Edge,
  type EdgeChange,
  type Node,
  type NodeChange,
  type NodeProps,
  type ReactFlowInstance,
} from '@xyflow/react';
import { memo, useCallback, useEffect, useMemo, useRef, useState, type KeyboardEvent } from 'react';
import type { ApiError } from './api';
import {
  addEdge,
  addNode,
  canonical,
  diffGraphs,
  edgeIssues,
  emptyGraph,
  freshId,
  insertVariable,
  openBraces,
  pinIssues,
  pointerOptions,
  removeEdge,
  removeNode,
  removePort,
  setMapping,
  starterNode,
  templateParts,
  updateNode,
  type GraphDiff,
  type Issue,
} from './editdoc';
import { KIND_LABEL, nodeSubtitle } from './graphview';
import { layoutGraph, NODE_WIDTH, nodeHeight, portsOf, splitRef } from './layout';
import type { ActionInfo, AgentInfo, DryRun, Graph, GraphEdge, GraphNode, Kind, Layout, MappingEntry, Variable, WorkflowDetail } from './types';
import { asApiError, ErrorState, formatTime, Link, Loaded, Loading, useLoad, useSession } from './ui';
import quickstart from '../../examples/quickstart.json';

/** The bundled examples a new workflow may start from. */
export const EXAMPLES: Record<string, { label: string; graph: Graph }> = {
  quickstart: { label: 'Quickstart: input → gate → notes action → output', graph: quickstart as unknown as Graph },
};

const PLAIN_KINDS: Kind[] = ['input', 'gate', 'validator', 'merge', 'approval', 'output'];

interface Catalog {
  actions: ActionInfo[];
  agents: AgentInfo[];
  variables: Variable[] | null;
  variablesError: ApiError | null;
}

interface EditorData {
  w: WorkflowDetail;
  layout: Layout;
  catalog: Catalog;
}

export function EditorPage({ workflowKey }: { workflowKey: string }) {
  const { client } = useSession();
  const [load, reload] = useLoad(async (): Promise<EditorData> => {
    const [w, layout] = await Promise.all([client.getWorkflow(workflowKey), client.getLayout(workflowKey)]);
    const [actions, agents, variables] = await Promise.all([
      client.listActions().catch(() => [] as ActionInfo[]),
      client.listAgents().catch(() => [] as AgentInfo[]),
      client.listVariables().then(
        (v) => ({ v, e: null }),
        (e: unknown) => ({ v: null, e: asApiError(e) }),
      ),
    ]);
    return { w, layout, catalog: { actions, agents, variables: variables.v, variablesError: variables.e } };
  }, [workflowKey]);
  return (
    <div className="page page-wide">
      <Loaded load={load} what="workflow" retry={reload}>
        {(d: EditorData) => <Editor key={`${d.w.draft.revision}`} init={d} onReload={reload} />}
      </Loaded>
    </div>
  );
}

type Verdict = { source: 'check' | 'dry-run'; draftRevision?: number; result: DryRun };
type Panel = 'inspector' | 'issues' | 'dryrun' | 'simulate' | 'publish' | 'json' | 'yaml';

function Editor({ init, onReload }: { init: EditorData; onReload(): void }) {
  const { client, navigate } = useSession();
  const key = init.w.key;
  const [doc, setDoc] = useState<Graph>(init.w.draft.graph);
  const [saved, setSaved] = useState<{ revision: number; graph: Graph; savedBy: string; savedAt: string }>({
    revision: init.w.draft.revision,
    graph: init.w.draft.graph,
    savedBy: init.w.draft.savedBy,
    savedAt: init.w.draft.savedAt,
  });
  const dirty = useMemo(() => canonical(doc) !== canonical(saved.graph), [doc, saved]);
  const [positions, setPositions] = useState<Record<string, { x: number; y: number }>>(init.layout.positions);
  const [selected, setSelected] = useState<string | null>(null);
  const [verdict, setVerdict] = useState<Verdict | null>(null);
  const [notice, setNotice] = useState<{ kind: 'error' | 'info'; text: string; testid?: string } | null>(null);
  const [conflict, setConflict] = useState<{ theirs: WorkflowDetail } | null>(null);
  const [panel, setPanel] = useState<Panel>('inspector');
  const [busy, setBusy] = useState(false);
  const checkSeq = useRef(0);
  const flow = useRef<ReactFlowInstance<EditFlowNode, Edge> | null>(null);

  // A node added or removed: show the whole graph again.
  useEffect(() => {
    const t = setTimeout(() => void flow.current?.fitView({ padding: 0.15, maxZoom: 1.1 }), 30);
    return () => clearTimeout(t);
  }, [doc.nodes.length]);

  // A graph none of whose nodes has a saved position is laid out by ELK
  // (nodes added later are placed beside the others).
  const laying = useRef(false);
  useEffect(() => {
    const missing = doc.nodes.filter((n) => !positions[n.id]);
    if (missing.length === 0 || laying.current) return;
    if (missing.length < doc.nodes.length) {
      // Nodes the JSON view added: beside the others, one under another.
      const xs = Object.values(positions).map((p) => p.x);
      const right = (xs.length ? Math.max(...xs) : 0) + NODE_WIDTH + 56;
      setPositions((p) => ({ ...p, ...Object.fromEntries(missing.map((n, i) => [n.id, { x: right, y: 40 + i * 140 }])) }));
      return;
    }
    laying.current = true;
    layoutGraph(doc)
      .then(
        (l) => {
          setPositions((p) => ({ ...l.positions, ...p }));
          setTimeout(() => void flow.current?.fitView({ padding: 0.15, maxZoom: 1.1 }), 30);
        },
        (e: unknown) => setNotice({ kind: 'error', text: `Layout failed: ${asApiError(e).message}` }),
      )
      .finally(() => {
        laying.current = false;
      });
  }, [doc, positions]);

  // The saved draft's dry-run on load.
  const dryRun = useCallback(
    async (revision: number) => {
      const seq = ++checkSeq.current;
      try {
        const r = await client.dryRun(key, revision);
        if (seq === checkSeq.current) setVerdict({ source: 'dry-run', draftRevision: r.draftRevision, result: r });
      } catch (e) {
        setNotice({ kind: 'error', text: `Dry-run failed: ${asApiError(e).message}` });
      }
    },
    [client, key],
  );
  useEffect(() => {
    void dryRun(init.w.draft.revision);
  }, [dryRun, init.w.draft.revision]);

  // Every unsaved change is checked by the server (debounced).
  useEffect(() => {
    if (!dirty) return;
    const seq = ++checkSeq.current;
    const t = setTimeout(() => {
      client.checkGraph(doc).then(
        (r) => seq === checkSeq.current && setVerdict({ source: 'check', result: r }),
        (e: unknown) => seq === checkSeq.current && setNotice({ kind: 'error', text: `Check failed: ${asApiError(e).message}` }),
      );
    }, 350);
    return () => clearTimeout(t);
  }, [client, doc, dirty]);

  const issues = useMemo(() => verdict?.result.issues ?? [], [verdict]);
  const pinned = useMemo(() => pinIssues(doc, issues), [doc, issues]);

  const saveLayout = useCallback(
    (p: Record<string, { x: number; y: number }>, g: Graph) => {
      const ids = new Set(g.nodes.map((n) => n.id));
      const kept = Object.fromEntries(Object.entries(p).filter(([id]) => ids.has(id)));
      client.setLayout(key, kept).catch((e: unknown) => setNotice({ kind: 'error', text: `Positions not saved: ${asApiError(e).message}` }));
    },
    [client, key],
  );

  const place = useCallback(
    (g: Graph): { x: number; y: number } => {
      const xs = g.nodes.map((n) => positions[n.id]?.x ?? 0);
      const right = xs.length ? Math.max(...xs) + NODE_WIDTH + 56 : 40;
      return { x: right, y: 60 };
    },
    [positions],
  );

  const add = (n: GraphNode) => {
    setPositions((p) => ({ ...p, [n.id]: place(doc) }));
    setDoc((g) => addNode(g, n));
    setSelected(n.id);
    setPanel('inspector');
  };

  const tidy = () => {
    layoutGraph(doc).then((l) => {
      setPositions(l.positions);
      saveLayout(l.positions, doc);
      setTimeout(() => void flow.current?.fitView({ padding: 0.15, maxZoom: 1.1 }), 30);
    }, (e: unknown) => setNotice({ kind: 'error', text: `Layout failed: ${asApiError(e).message}` }));
  };

  const tryConnect = async (e: GraphEdge): Promise<boolean> => {
    const candidate = addEdge(doc, e);
    if (candidate === doc) return false;
    const idx = candidate.edges.length - 1;
    try {
      const r = await client.checkGraph(candidate);
      const bad = edgeIssues(r.issues, idx);
      if (bad.length) {
        setNotice({ kind: 'error', testid: 'connect-refused', text: `${e.from} → ${e.to} refused: ${bad.map((b) => b.message).join('; ')}` });
        return false;
      }
    } catch (err) {
      setNotice({ kind: 'error', text: `Could not check the edge: ${asApiError(err).message}` });
      return false;
    }
    setNotice(null);
    setDoc(candidate);
    return true;
  };

  const remove = (id: string) => {
    setDoc((g) => removeNode(g, id));
    if (selected === id) setSelected(null);
  };

  const save = async (expected = saved.revision) => {
    setBusy(true);
    try {
      const r = await client.saveDraft(key, expected, doc);
      setSaved({ revision: r.draftRevision, graph: doc, savedBy: 'you', savedAt: new Date().toISOString() });
      setConflict(null);
      setNotice({ kind: 'info', text: `Saved draft r${r.draftRevision}.`, testid: 'saved' });
      saveLayout(positions, doc);
      await dryRun(r.draftRevision);
    } catch (e) {
      const err = asApiError(e);
      if (err.status === 409 && err.code === 'REVISION_CONFLICT') {
        try {
          setConflict({ theirs: await client.getWorkflow(key) });
        } catch (e2) {
          setNotice({ kind: 'error', text: asApiError(e2).message });
        }
      } else {
        setNotice({ kind: 'error', text: `Not saved: ${err.message}`, testid: 'save-error' });
      }
    } finally {
      setBusy(false);
    }
  };

  const onNodesChange = (changes: NodeChange<EditFlowNode>[]) => {
    setRfNodes((ns) => applyNodeChanges(changes.filter((c) => c.type !== 'remove' && c.type !== 'select'), ns));
    let moved: Record<string, { x: number; y: number }> | null = null;
    let ended = false;
    for (const c of changes) {
      if (c.type === 'position' && c.position) {
        moved = { ...(moved ?? {}), [c.id]: c.position };
        if (!c.dragging) ended = true;
      } else if (c.type === 'position' && c.dragging === false) {
        ended = true;
      } else if (c.type === 'remove') {
        remove(c.id);
      }
    }
    if (moved || ended) {
      setPositions((p) => {
        const next = moved ? { ...p, ...moved } : p;
        if (ended) saveLayout(next, doc);
        return next;
      });
    }
  };
  const onEdgesChange = (changes: EdgeChange[]) => {
    for (const c of changes) {
      if (c.type === 'remove') {
        const [from, to] = c.id.split('->');
        setDoc((g) => removeEdge(g, { from, to }));
      }
    }
  };

  // React Flow keeps what it measured on its nodes: they live in state,
  // rebuilt from the document, the positions and the issues, keeping the
  // measurements (applyNodeChanges stores them).
  const [rfNodes, setRfNodes] = useState<EditFlowNode[]>([]);
  useEffect(() => {
    setRfNodes((prev) => {
      const old = new Map(prev.map((n) => [n.id, n]));
      return doc.nodes.map((n) => ({
        ...(old.get(n.id) ?? {}),
        id: n.id,
        type: 'edit' as const,
        position: positions[n.id] ?? old.get(n.id)?.position ?? { x: 0, y: 0 },
        data: { node: n, issues: pinned.nodes[n.id] ?? [], selected: selected === n.id },
        selected: selected === n.id,
      }));
    });
  }, [doc, positions, pinned, selected]);
  const rfEdges: Edge[] = doc.edges.flatMap((e) => {
    const f = splitRef(e.from);
    const t = splitRef(e.to);
    if (!f || !t) return [];
    const id = `${e.from}->${e.to}`;
    return [{ id, source: f.node, sourceHandle: f.port, target: t.node, targetHandle: t.port, className: pinned.edges[id] ? 'edge-issue' : 'edge-static' }];
  });

  const laidOut = doc.nodes.every((n) => positions[n.id]);
  const node = selected ? doc.nodes.find((n) => n.id === selected) ?? null : null;
  const nodeIndex = node ? doc.nodes.indexOf(node) : -1;

  return (
    <div className="editor" data-testid="editor" data-dirty={dirty ? 'true' : 'false'} data-draft-revision={saved.revision} data-positions={Object.keys(positions).length}>
      <div className="page-head">
        <div>
          <div className="crumbs">
            <Link to={{ name: 'workflows' }}>Workflows</Link> / <Link to={{ name: 'workflow', key }}>{key}</Link> /
          </div>
          <h1>
            Editing {key} <span className="muted">draft r{saved.revision}</span>
          </h1>
          <div className="facts">
            <span data-testid="save-state">
              {dirty ? 'unsaved changes' : `saved by ${saved.savedBy} · ${formatTime(saved.savedAt)}`}
            </span>
            {verdict && (
              <span data-testid="verdict" data-valid={verdict.result.valid ? 'true' : 'false'} data-source={verdict.source}>
                {verdict.result.valid ? 'valid' : `${verdict.result.issues.length} issue${verdict.result.issues.length === 1 ? '' : 's'}`} ·{' '}
                {verdict.source === 'dry-run' ? `dry-run of r${verdict.draftRevision}` : 'check of unsaved changes'}
              </span>
            )}
          </div>
        </div>
        <div className="editor-actions">
          <button type="button" className="btn" onClick={tidy} data-testid="tidy" title="Lay the graph out in layers again (positions are saved beside the draft)">
            Tidy layout
          </button>
          <button type="button" className="btn" onClick={() => (dirty ? void client.checkGraph(doc).then((r) => setVerdict({ source: 'check', result: r })) : void dryRun(saved.revision))} data-testid="validate">
            Validate
          </button>
          <button type="button" className="btn btn-primary" disabled={!dirty || busy} onClick={() => void save()} data-testid="save">
            Save draft
          </button>
        </div>
      </div>
      {notice && (
        <div className={notice.kind === 'error' ? 'error-box' : 'info-box'} role={notice.kind === 'error' ? 'alert' : 'status'} data-testid={notice.testid ?? 'notice'}>
          {notice.text}{' '}
          <button type="button" className="btn btn-quiet" onClick={() => setNotice(null)} aria-label="dismiss">
            ×
          </button>
        </div>
      )}
      {conflict && (
        <ConflictView
          mine={doc}
          myRevision={saved.revision}
          theirs={conflict.theirs}
          onReload={onReload}
          onOverwrite={() => void save(conflict.theirs.draft.revision)}
        />
      )}
      <div className="editor-body">
        <Palette catalog={init.catalog} doc={doc} onAdd={add} />
        <div className="editor-canvas canvas" data-testid="edit-canvas" data-laid-out={laidOut ? 'true' : 'false'}>
          {!laidOut && <Loading what="the layout" />}
          {laidOut && (
          <ReactFlow
            nodes={rfNodes}
            edges={rfEdges}
            nodeTypes={editNodeTypes}
            onInit={(i) => {
              flow.current = i;
            }}
            onNodesChange={onNodesChange}
            onEdgesChange={onEdgesChange}
            onConnect={(c: Connection) => {
              if (c.source && c.target && c.sourceHandle && c.targetHandle) void tryConnect({ from: `${c.source}.${c.sourceHandle}`, to: `${c.target}.${c.targetHandle}` });
            }}
            onNodeClick={(_, n) => {
              setSelected(n.id);
              setPanel('inspector');
            }}
            onPaneClick={() => setSelected(null)}
            deleteKeyCode={['Delete', 'Backspace']}
            fitView
            fitViewOptions={{ padding: 0.15, maxZoom: 1.1 }}
            minZoom={0.2}
          >
            <Background gap={24} size={1} />
            <Controls showInteractive={false} />
          </ReactFlow>
          )}
        </div>
        <aside className="editor-side">
          <div className="tabs" role="tablist">
            {(['inspector', 'issues', 'dryrun', 'simulate', 'publish', 'json', 'yaml'] as Panel[]).map((p) => (
              <button key={p} type="button" role="tab" aria-selected={panel === p} className={`tab${panel === p ? ' active' : ''}`} onClick={() => setPanel(p)} data-testid={`tab-${p}`}>
                {PANEL_LABEL[p]}
                {p === 'issues' && issues.length > 0 && <span className="badge issue-count">{issues.length}</span>}
              </button>
            ))}
          </div>
          {panel === 'inspector' &&
            (node ? (
              <Inspector
                key={node.id}
                doc={doc}
                node={node}
                index={nodeIndex}
                issues={pinned.nodes[node.id] ?? []}
                catalog={init.catalog}
                onChange={(f) => setDoc((g) => updateNode(g, node.id, f))}
                onDoc={setDoc}
                onConnect={tryConnect}
                onDelete={() => remove(node.id)}
              />
            ) : (
              <div className="panel-hint">Select a node to inspect it, or add one from the palette. Drag from an output port to an input port to connect them.</div>
            ))}
          {panel === 'issues' && (
            <IssueList
              doc={doc}
              issues={issues}
              warnings={verdict?.result.warnings ?? []}
              onPick={(id) => {
                setSelected(id);
                setPanel('inspector');
              }}
            />
          )}
          {panel === 'dryrun' && <DryRunPanel verdict={verdict} />}
          {panel === 'simulate' && <SimulatePanel workflowKey={key} doc={doc} dirty={dirty} revision={saved.revision} onRun={(id) => navigate({ name: 'run', runId: id })} />}
          {panel === 'publish' && <PublishPanel w={init.w} doc={doc} dirty={dirty} revision={saved.revision} verdict={verdict} catalog={init.catalog} onRun={(id) => navigate({ name: 'run', runId: id })} />}
          {panel === 'json' && <JsonPanel doc={doc} onApply={setDoc} />}
          {panel === 'yaml' && <YamlPanel workflowKey={key} revision={saved.revision} dirty={dirty} onSaved={onReload} />}
        </aside>
      </div>
    </div>
  );
}

const PANEL_LABEL: Record<Panel, string> = {
  inspector: 'Inspector',
  issues: 'Issues',
  dryrun: 'Dry-run',
  simulate: 'Simulate',
  publish: 'Publish',
  json: 'JSON',
  yaml: 'YAML',
};

interface EditNodeData extends Record<string, unknown> {
  node: GraphNode;
  issues: Issue[];
  selected: boolean;
}
type EditFlowNode = Node<EditNodeData, 'edit'>;

const EditNode = memo(function EditNode({ data }: NodeProps<EditFlowNode>) {
  const { node, issues } = data;
  const { inputs, outputs } = portsOf(node);
  const rows = Math.max(inputs.length, outputs.length, 1);
  return (
    <div
      className={`wnode kind-${node.kind}${data.selected ? ' selected' : ''}${issues.length ? ' has-issues' : ''}`}
      style={{ width: NODE_WIDTH, height: nodeHeight(node) }}
      data-node-id={node.id}
      data-issues={issues.length}
      data-issue-codes={issues.map((i) => i.code).join(' ')}
      data-testid={`node-${node.id}`}
      title={issues.map((i) => `${i.code}: ${i.message}`).join('\n')}
    >
      <div className="wnode-head">
        <span className="wnode-kind">{KIND_LABEL[node.kind] ?? node.kind}</span>
        {issues.length > 0 && (
          <span className="badge issue-count" data-testid={`issues-${node.id}`}>
            {issues.length} issue{issues.length > 1 ? 's' : ''}
          </span>
        )}
      </div>
      <div className="wnode-title">
        <span className="wnode-id">{node.id}</span>
      </div>
      <div className="wnode-sub" title={nodeSubtitle(node)}>
        {nodeSubtitle(node) || '\u00a0'}
      </div>
      <div className="wnode-ports" style={{ height: rows * 20 }}>
        {inputs.map(([p, schema], i) => (
          <div key={`in-${p}`} className="port port-in" style={{ top: i * 20 }} title={`${p}: ${schema}`}>
            <Handle type="target" position={Position.Left} id={p} data-port={`${node.id}.${p}`} />
            <span className="port-name">{p}</span>
            <span className="port-schema">{schema}</span>
          </div>
        ))}
        {outputs.map(([p, schema], i) => (
          <div key={`out-${p}`} className="port port-out" style={{ top: i * 20 }} title={`${p}: ${schema}`}>
            <span className="port-schema">{schema}</span>
            <span className="port-name">{p}</span>
            <Handle type="source" position={Position.Right} id={p} data-port={`${node.id}.${p}`} />
          </div>
        ))}
      </div>
    </div>
  );
});
const editNodeTypes = { edit: EditNode };

function Palette({ catalog, doc, onAdd }: { catalog: Catalog; doc: Graph; onAdd(n: GraphNode): void }) {
  const [agentRev, setAgentRev] = useState<Record<string, number>>({});
  return (
    <nav className="palette" aria-label="Palette" data-testid="palette">
      <div className="palette-group">Nodes</div>
      {PLAIN_KINDS.map((k) => (
        <button key={k} type="button" className="btn palette-item" data-testid={`add-${k}`} onClick={() => onAdd(starterNode(k, freshId(doc, k)))}>
          + {KIND_LABEL[k]}
        </button>
      ))}
      <div className="palette-group">Actions</div>
      {catalog.actions.length === 0 && <div className="muted small">No action contracts.</div>}
      {catalog.actions.map((a) => (
        <button
          key={`${a.id}@${a.version}`}
          type="button"
          className="btn palette-item"
          data-testid={`add-action-${a.id}@${a.version}`}
          title={`${a.description ?? ''}\nrisk ${a.risk}${a.requiredPermissions?.length ? `; needs ${a.requiredPermissions.join(', ')}` : ''}`}
          onClick={() => onAdd({ ...starterNode('action', freshId(doc, a.id.split('.').pop() ?? 'action')), action: { id: a.id, version: a.version } })}
        >
          + {a.id}@{a.version} <span className={`badge risk-${a.risk}`}>{a.risk}</span>
        </button>
      ))}
      <div className="palette-group">Agents</div>
      {catalog.agents.filter((a) => !a.archived).length === 0 && <div className="muted small">No agents (or no agents.read).</div>}
      {catalog.agents
        .filter((a) => !a.archived)
        .map((a) => {
          const latest = Number(a.latestRevision ?? 1);
          const rev = agentRev[a.key] ?? latest;
          return (
            <div key={a.key} className="palette-agent">
              <span>{a.key}</span>
              <select aria-label={`revision of ${a.key}`} value={rev} onChange={(e) => setAgentRev({ ...agentRev, [a.key]: Number(e.target.value) })}>
                {Array.from({ length: latest }, (_, i) => latest - i).map((r) => (
                  <option key={r} value={r}>
                    r{r}
                  </option>
                ))}
              </select>
              <button type="button" className="btn btn-quiet" data-testid={`add-agent-${a.key}`} onClick={() => onAdd({ ...starterNode('agent', freshId(doc, a.key)), agent: { key: a.key, revision: rev } })}>
                + agent
              </button>
              <button type="button" className="btn btn-quiet" data-testid={`add-decision-${a.key}`} onClick={() => onAdd({ ...starterNode('agent-decision', freshId(doc, a.key)), agent: { key: a.key, revision: rev } })}>
                + decision
              </button>
            </div>
          );
        })}
    </nav>
  );
}

function FieldIssues({ issues, prefix }: { issues: Issue[]; prefix: string }) {
  const mine = issues.filter((i) => fieldOf(i) === prefix || fieldOf(i).startsWith(prefix + '/'));
  if (!mine.length) return null;
  return (
    <ul className="field-issues" data-testid={`field-issues-${prefix}`}>
      {mine.map((i, n) => (
        <li key={n}>
          <code>{i.code}</code> {i.message}
        </li>
      ))}
    </ul>
  );
}

/** The part of an issue's path after /nodes/N (set by Inspector). */
function fieldOf(i: Issue): string {
  return i.path.replace(/^\/nodes\/\d+/, '');
}

interface InspectorProps {
  doc: Graph;
  node: GraphNode;
  index: number;
  issues: Issue[];
  catalog: Catalog;
  onChange(f: (n: GraphNode) => GraphNode): void;
  onDoc(f: (g: Graph) => Graph): void;
  onConnect(e: GraphEdge): Promise<boolean>;
  onDelete(): void;
}

function Inspector({ doc, node, issues, catalog, onChange, onDoc, onConnect, onDelete }: InspectorProps) {
  const schemaNames = ['any', ...Object.keys(doc.schemas ?? {}).sort()];
  const calls = node.kind === 'action' || node.kind === 'agent' || node.kind === 'agent-decision';
  const multiInput = calls || node.kind === 'merge';
  const [newPort, setNewPort] = useState('');
  return (
    <div className="panel inspector" data-testid="inspector" data-node={node.id}>
      <div className="panel-head">
        <span className="panel-kind">{KIND_LABEL[node.kind]}</span>
        <span className="panel-title">{node.id}</span>
        <button type="button" className="btn btn-danger" onClick={onDelete} data-testid="delete-node">
          Delete
        </button>
      </div>
      {issues.length > 0 && (
        <ul className="field-issues" data-testid="node-issues">
          {issues.map((i, n) => (
            <li key={n}>
              <code>{i.code}</code> <span className="muted">{fieldOf(i) || '/'}</span> {i.message}
            </li>
          ))}
        </ul>
      )}
      {node.kind === 'action' && (
        <label className="field">
          Action
          <select
            data-testid="pick-action"
            value={node.action ? `${node.action.id}@${node.action.version}` : ''}
            onChange={(e) => {
              const a = catalog.actions.find((x) => `${x.id}@${x.version}` === e.target.value);
              if (a) onChange((n) => ({ ...n, action: { id: a.id, version: a.version } }));
            }}
          >
            <option value="">choose…</option>
            {node.action && !catalog.actions.some((a) => a.id === node.action!.id && a.version === node.action!.version) && (
              <option value={`${node.action.id}@${node.action.version}`}>{`${node.action.id}@${node.action.version}`}</option>
            )}
            {catalog.actions.map((a) => (
              <option key={`${a.id}@${a.version}`} value={`${a.id}@${a.version}`}>
                {a.id}@{a.version} ({a.risk})
              </option>
            ))}
          </select>
        </label>
      )}
      {(node.kind === 'agent' || node.kind === 'agent-decision') && (
        <div className="field">
          Agent <code>{node.agent ? `${node.agent.key} r${node.agent.revision}` : 'none'}</code>
        </div>
      )}
      <fieldset className="field-set">
        <legend>Ports</legend>
        {(['inputs', 'outputs'] as const).map((side) =>
          Object.entries(node[side] ?? {}).map(([p, s]) => (
            <div key={`${side}-${p}`} className="port-row">
              <span className="muted">{side === 'inputs' ? 'in' : 'out'}</span> <code>{p}</code>
              <select
                aria-label={`schema of ${side === 'inputs' ? 'input' : 'output'} ${p}`}
                data-testid={`schema-${side}-${p}`}
                value={s}
                onChange={(e) => onChange((n) => ({ ...n, [side]: { ...(n[side] ?? {}), [p]: e.target.value } }))}
              >
                {[...new Set([...schemaNames, s])].map((x) => (
                  <option key={x} value={x}>
                    {x}
                  </option>
                ))}
              </select>
              {side === 'inputs' && multiInput && Object.keys(node.inputs ?? {}).length > 1 && (
                <button type="button" className="btn btn-quiet" onClick={() => onDoc((g) => removePort(g, node.id, 'inputs', p))} aria-label={`remove input ${p}`}>
                  ×
                </button>
              )}
            </div>
          )),
        )}
        {multiInput && (
          <form
            className="port-row"
            onSubmit={(e) => {
              e.preventDefault();
              const name = newPort.trim();
              if (!name) return;
              onChange((n) => ({ ...n, inputs: { ...(n.inputs ?? {}), [name]: 'any' } }));
              setNewPort('');
            }}
          >
            <input aria-label="new input port" placeholder="new input port" value={newPort} onChange={(e) => setNewPort(e.target.value)} data-testid="new-port" />
            <button type="submit" className="btn btn-quiet">
              Add input
            </button>
          </form>
        )}
        <FieldIssues issues={issues} prefix="/inputs" />
        <FieldIssues issues={issues} prefix="/outputs" />
      </fieldset>
      {Object.keys(node.outputs ?? {}).length > 0 && <ConnectForm doc={doc} node={node} onConnect={onConnect} />}
      {node.kind === 'gate' && (
        <label className="field">
          Gate expression (cel/v1; the input is <code>input</code>)
          <textarea
            rows={3}
            data-testid="gate-expression"
            value={node.expression ?? ''}
            onChange={(e) => {
              const v = e.target.value;
              onChange((n) => ({ ...n, language: 'cel/v1', expression: v }));
            }}
            spellCheck={false}
          />
          <FieldIssues issues={issues} prefix="/expression" />
        </label>
      )}
      {node.kind === 'validator' && <SchemaField node={node} schemaNames={schemaNames} issues={issues} onChange={onChange} />}
      {node.kind === 'approval' && (
        <NumberField label="Approval timeout (ms)" value={node.timeoutMs} testid="approval-timeout" onChange={(v) => onChange((n) => ({ ...n, timeoutMs: v }))} />
      )}
      {calls && <MappingEditor doc={doc} node={node} issues={issues} variables={catalog.variables} variablesError={catalog.variablesError} onDoc={onDoc} />}
      {calls && (
        <fieldset className="field-set">
          <legend>Retry and timeout</legend>
          <NumberField label="Max attempts" value={node.retry?.maxAttempts} testid="retry-max" onChange={(v) => onChange((n) => withRetry(n, 'maxAttempts', v))} />
          <NumberField label="Initial interval (ms)" value={node.retry?.initialIntervalMs} testid="retry-initial" onChange={(v) => onChange((n) => withRetry(n, 'initialIntervalMs', v))} />
          <NumberField label="Backoff" value={node.retry?.backoff} step={0.1} testid="retry-backoff" onChange={(v) => onChange((n) => withRetry(n, 'backoff', v))} />
          <NumberField label="Max interval (ms)" value={node.retry?.maxIntervalMs} testid="retry-maxint" onChange={(v) => onChange((n) => withRetry(n, 'maxIntervalMs', v))} />
          <NumberField label="Timeout (ms)" value={node.timeoutMs} testid="timeout" onChange={(v) => onChange((n) => ({ ...n, timeoutMs: v }))} />
          <FieldIssues issues={issues} prefix="/retry" />
          <FieldIssues issues={issues} prefix="/timeoutMs" />
        </fieldset>
      )}
    </div>
  );
}

function withRetry(n: GraphNode, k: keyof NonNullable<GraphNode['retry']>, v: number | undefined): GraphNode {
  const r = { ...(n.retry ?? {}) };
  if (v === undefined) delete r[k];
  else r[k] = v;
  const out: GraphNode = { ...n, retry: r };
  if (Object.keys(r).length === 0) delete out.retry;
  return out;
}

function NumberField({ label, value, onChange, step, testid }: { label: string; value?: number; onChange(v: number | undefined): void; step?: number; testid: string }) {
  return (
    <label className="field field-inline">
      {label}
      <input
        type="number"
        step={step ?? 1}
        data-testid={testid}
        value={value ?? ''}
        onChange={(e) => onChange(e.target.value === '' ? undefined : Number(e.target.value))}
      />
    </label>
  );
}

function SchemaField({ node, schemaNames, issues, onChange }: { node: GraphNode; schemaNames: string[]; issues: Issue[]; onChange(f: (n: GraphNode) => GraphNode): void }) {
  const [text, setText] = useState(typeof node.schema === 'object' ? JSON.stringify(node.schema, null, 2) : '');
  const [err, setErr] = useState<string | null>(null);
  const named = typeof node.schema === 'string';
  return (
    <fieldset className="field-set">
      <legend>Validator schema</legend>
      <label className="field field-inline">
        Named schema
        <select
          value={named ? (node.schema as string) : ''}
          onChange={(e) => {
            const v = e.target.value;
            onChange((n) => ({ ...n, schema: v || ((text ? safeParse(text) ?? {} : {}) as Record<string, unknown>) }));
          }}
        >
          <option value="">inline JSON Schema</option>
          {schemaNames
            .filter((s) => s !== 'any')
            .map((s) => (
              <option key={s} value={s}>
                {s}
              </option>
            ))}
        </select>
      </label>
      {!named && (
        <textarea
          rows={6}
          data-testid="validator-schema"
          spellCheck={false}
          value={text}
          onChange={(e) => {
            setText(e.target.value);
            const v = safeParse(e.target.value);
            if (v === undefined) setErr('not JSON yet: the schema keeps its last valid value');
            else {
              setErr(null);
              onChange((n) => ({ ...n, schema: v as Record<string, unknown> }));
            }
          }}
        />
      )}
      {err && <div className="error-inline">{err}</div>}
      <FieldIssues issues={issues} prefix="/schema" />
    </fieldset>
  );
}

function safeParse(s: string): unknown {
  try {
    return JSON.parse(s);
  } catch {
    return undefined;
  }
}

function ConnectForm({ doc, node, onConnect }: { doc: Graph; node: GraphNode; onConnect(e: GraphEdge): Promise<boolean> }) {
  const outs = Object.keys(node.outputs ?? {}).sort();
  const targets = doc.nodes.filter((n) => n.id !== node.id).flatMap((n) => Object.keys(n.inputs ?? {}).sort().map((p) => `${n.id}.${p}`));
  const [from, setFrom] = useState(outs[0] ?? '');
  const [to, setTo] = useState('');
  const existing = doc.edges.filter((e) => splitRef(e.from)?.node === node.id);
  return (
    <fieldset className="field-set" data-testid="connect-form">
      <legend>Connect</legend>
      <form
        className="port-row"
        onSubmit={(e) => {
          e.preventDefault();
          if (from && to) void onConnect({ from: `${node.id}.${from}`, to }).then((ok) => ok && setTo(''));
        }}
      >
        <select aria-label="from output port" value={from} onChange={(e) => setFrom(e.target.value)} data-testid="connect-from">
          {outs.map((p) => (
            <option key={p} value={p}>
              {p}
            </option>
          ))}
        </select>
        →
        <select aria-label="to input port" value={to} onChange={(e) => setTo(e.target.value)} data-testid="connect-to">
          <option value="">input port…</option>
          {targets.map((t) => (
            <option key={t} value={t}>
              {t}
            </option>
          ))}
        </select>
        <button type="submit" className="btn" disabled={!to} data-testid="connect">
          Connect
        </button>
      </form>
      {existing.length > 0 && (
        <ul className="edge-list">
          {existing.map((e) => (
            <li key={`${e.from}->${e.to}`}>
              {e.from} → {e.to}
            </li>
          ))}
        </ul>
      )}
    </fieldset>
  );
}

type MappingMode = 'literal' | 'pointer' | 'template';

function modeOf(m: MappingEntry): MappingMode {
  if (m.pointer !== undefined) return 'pointer';
  if (m.template !== undefined) return 'template';
  return 'literal';
}

function MappingEditor({
  doc,
  node,
  issues,
  variables,
  variablesError,
  onDoc,
}: {
  doc: Graph;
  node: GraphNode;
  issues: Issue[];
  variables: Variable[] | null;
  variablesError: ApiError | null;
  onDoc(f: (g: Graph) => Graph): void;
}) {
  const [field, setField] = useState('');
  const pointers = pointerOptions(doc, node);
  const set = (f: string, e: MappingEntry | undefined) => onDoc((g) => setMapping(g, node.id, f, e));
  return (
    <fieldset className="field-set" data-testid="mapping-editor">
      <legend>Mapping (the call input)</legend>
      {Object.entries(node.mapping ?? {}).map(([f, m]) => {
        const mode = modeOf(m);
        return (
          <div key={f} className="mapping-row" data-field={f}>
            <div className="port-row">
              <code>{f}</code>
              <select
                aria-label={`kind of ${f}`}
                data-testid={`mapping-mode-${f}`}
                value={mode}
                onChange={(e) => {
                  const to = e.target.value as MappingMode;
                  if (to === 'literal') set(f, { literal: '' });
                  if (to === 'pointer') set(f, { pointer: pointers[0] ?? '/in' });
                  if (to === 'template') set(f, { template: '' });
                }}
              >
                <option value="literal">literal</option>
                <option value="pointer">JSON pointer</option>
                <option value="template">template</option>
              </select>
              <button type="button" className="btn btn-quiet" onClick={() => set(f, undefined)} aria-label={`remove ${f}`}>
                ×
              </button>
            </div>
            {mode === 'literal' && <LiteralField value={m.literal} onChange={(v) => set(f, { literal: v })} testid={`literal-${f}`} />}
            {mode === 'pointer' && (
              <>
                <input list={`ptr-${node.id}-${f}`} value={m.pointer ?? ''} onChange={(e) => set(f, { pointer: e.target.value })} data-testid={`pointer-${f}`} spellCheck={false} />
                <datalist id={`ptr-${node.id}-${f}`}>
                  {pointers.map((p) => (
                    <option key={p} value={p} />
                  ))}
                </datalist>
              </>
            )}
            {mode === 'template' && (
              <TemplateField
                field={f}
                value={m.template ?? ''}
                bindings={m.bindings ?? {}}
                pointers={pointers}
                variables={variables}
                variablesError={variablesError}
                issues={issues.filter((i) => fieldOf(i).startsWith(`/mapping/${f.replace(/~/g, '~0').replace(/\//g, '~1')}`))}
                onChange={(template, bindings) => set(f, Object.keys(bindings).length ? { template, bindings } : { template })}
              />
            )}
            <FieldIssues issues={issues} prefix={`/mapping/${f}`} />
          </div>
        );
      })}
      <form
        className="port-row"
        onSubmit={(e) => {
          e.preventDefault();
          const name = field.trim();
          if (!name) return;
          set(name, { pointer: pointers[0] ?? '/in' });
          setField('');
        }}
      >
        <input placeholder="new field" aria-label="new mapping field" value={field} onChange={(e) => setField(e.target.value)} data-testid="new-mapping-field" />
        <button type="submit" className="btn btn-quiet" data-testid="add-mapping">
          Add field
        </button>
      </form>
    </fieldset>
  );
}

function LiteralField({ value, onChange, testid }: { value: unknown; onChange(v: unknown): void; testid: string }) {
  const [text, setText] = useState(JSON.stringify(value ?? ''));
  const bad = safeParse(text) === undefined;
  return (
    <>
      <input
        value={text}
        data-testid={testid}
        spellCheck={false}
        onChange={(e) => {
          setText(e.target.value);
          const v = safeParse(e.target.value);
          if (v !== undefined) onChange(v);
        }}
      />
      {bad && <div className="error-inline">a literal is a JSON value (strings in quotes)</div>}
    </>
  );
}

/**
 * A template with the {{ variable menu: typing "{{" lists the variables
 * GET /v1/variables gave (only those the caller's scopes allow); tokens
 * show as pills, flagged when the server's check names them.
 */
function TemplateField({
  field,
  value,
  bindings,
  pointers,
  variables,
  variablesError,
  issues,
  onChange,
}: {
  field: string;
  value: string;
  bindings: Record<string, string>;
  pointers: string[];
  variables: Variable[] | null;
  variablesError: ApiError | null;
  issues: Issue[];
  onChange(template: string, bindings: Record<string, string>): void;
}) {
  const ref = useRef<HTMLInputElement>(null);
  const [caret, setCaret] = useState(value.length);
  const [active, setActive] = useState(0);
  const [closed, setClosed] = useState(false);
  const open = closed ? null : openBraces(value, caret);
  const options = open && variables ? variables.filter((v) => v.key.startsWith(open.prefix)) : [];
  const [bindName, setBindName] = useState('');

  const choose = (k: string) => {
    const r = insertVariable(value, caret, k);
    onChange(r.text, bindings);
    setCaret(r.caret);
    requestAnimationFrame(() => {
      ref.current?.focus();
      ref.current?.setSelectionRange(r.caret, r.caret);
    });
  };
  const onKey = (e: KeyboardEvent<HTMLInputElement>) => {
    if (!open || options.length === 0) return;
    if (e.key === 'ArrowDown') {
      e.preventDefault();
      setActive((a) => (a + 1) % options.length);
    } else if (e.key === 'ArrowUp') {
      e.preventDefault();
      setActive((a) => (a - 1 + options.length) % options.length);
    } else if (e.key === 'Enter' || e.key === 'Tab') {
      e.preventDefault();
      choose(options[Math.min(active, options.length - 1)].key);
    } else if (e.key === 'Escape') {
      setClosed(true);
    }
  };
  const flagged = (token: string) => issues.some((i) => i.code === 'UNKNOWN_VARIABLE' && i.message.includes(`"${token}"`));
  return (
    <div className="template-field">
      <input
        ref={ref}
        value={value}
        data-testid={`template-${field}`}
        spellCheck={false}
        role="combobox"
        aria-expanded={options.length > 0}
        aria-autocomplete="list"
        onChange={(e) => {
          onChange(e.target.value, bindings);
          setCaret(e.target.selectionStart ?? e.target.value.length);
          setClosed(false);
          setActive(0);
        }}
        onSelect={(e) => setCaret((e.target as HTMLInputElement).selectionStart ?? value.length)}
        onKeyDown={onKey}
      />
      {open && (
        <ul className="var-menu" role="listbox" data-testid="var-menu">
          {variables === null && <li className="muted">Variables unavailable: {variablesError?.message ?? 'no variables.read'}</li>}
          {options.map((v, i) => (
            <li
              key={v.key}
              role="option"
              aria-selected={i === active}
              className={i === active ? 'active' : ''}
              data-var={v.key}
              onMouseDown={(e) => {
                e.preventDefault();
                choose(v.key);
              }}
            >
              <code>{v.key}</code> <span className="muted">{v.label}</span>
              {v.scope && <span className="badge">{v.scope}</span>}
            </li>
          ))}
          {variables !== null && options.length === 0 && <li className="muted">No variable starts with “{open.prefix}”.</li>}
        </ul>
      )}
      <div className="pills" data-testid={`pills-${field}`}>
        {templateParts(value).map((p, i) =>
          'token' in p ? (
            <span key={i} className={`pill${flagged(p.token) ? ' pill-bad' : ''}`} data-token={p.token} data-flagged={flagged(p.token) ? 'true' : 'false'}>
              {p.token}
            </span>
          ) : (
            <span key={i} className="pill-text">
              {p.text}
            </span>
          ),
        )}
      </div>
      <div className="bindings">
        {Object.entries(bindings).map(([b, ptr]) => (
          <div key={b} className="port-row">
            <code>{b}</code> ←
            <input list={`bind-${field}-${b}`} value={ptr} spellCheck={false} aria-label={`binding ${b}`} onChange={(e) => onChange(value, { ...bindings, [b]: e.target.value })} />
            <datalist id={`bind-${field}-${b}`}>
              {pointers.map((p) => (
                <option key={p} value={p} />
              ))}
            </datalist>
            <button
              type="button"
              className="btn btn-quiet"
              aria-label={`remove binding ${b}`}
              onClick={() => {
                const next = { ...bindings };
                delete next[b];
                onChange(value, next);
              }}
            >
              ×
            </button>
          </div>
        ))}
        <form
          className="port-row"
          onSubmit={(e) => {
            e.preventDefault();
            const n = bindName.trim();
            if (!n) return;
            onChange(value, { ...bindings, [n]: pointers[0] ?? '/in' });
            setBindName('');
          }}
        >
          <input placeholder="binding (e.g. item.id)" aria-label="new binding" value={bindName} onChange={(e) => setBindName(e.target.value)} />
          <button type="submit" className="btn btn-quiet">
            Bind
          </button>
        </form>
      </div>
    </div>
  );
}

function IssueList({ doc, issues, warnings, onPick }: { doc: Graph; issues: Issue[]; warnings: Issue[]; onPick(id: string): void }) {
  const pinned = pinIssues(doc, issues);
  if (!issues.length && !warnings.length) return <div className="panel-hint" data-testid="no-issues">No issues.</div>;
  const nodeOf = (i: Issue) => Object.entries(pinned.nodes).find(([, l]) => l.includes(i))?.[0];
  const edgeOf = (i: Issue) => Object.entries(pinned.edges).find(([, l]) => l.includes(i))?.[0];
  return (
    <ul className="issue-list" data-testid="issue-list">
      {issues.map((i, n) => {
        const id = nodeOf(i);
        const edge = edgeOf(i);
        return (
          <li key={n} data-node={id ?? ''} data-code={i.code}>
            <code>{i.code}</code> {id ? <button type="button" className="btn btn-quiet" onClick={() => onPick(id)}>{id}</button> : edge ? <span className="muted">{edge.replace('->', ' → ')}</span> : null}{' '}
            <span className="muted">{i.path}</span>
            <div>{i.message}</div>
          </li>
        );
      })}
      {warnings.map((i, n) => (
        <li key={`w${n}`} className="warning">
          <code>{i.code}</code> <span className="muted">{i.path}</span>
          <div>{i.message}</div>
        </li>
      ))}
    </ul>
  );
}

function DryRunPanel({ verdict }: { verdict: Verdict | null }) {
  if (!verdict) return <div className="panel-hint">Checking…</div>;
  const r = verdict.result;
  return (
    <div className="panel" data-testid="dryrun-panel">
      <div className="panel-sub">{verdict.source === 'dry-run' ? `Dry-run of saved draft r${verdict.draftRevision}` : 'Check of your unsaved changes'}</div>
      <dl className="kv">
        <dt>Verdict</dt>
        <dd>{r.valid ? 'valid' : `${r.issues.length} issue(s)`}</dd>
        <dt>Order</dt>
        <dd data-testid="dryrun-order">{r.order.length ? r.order.join(' → ') : '—'}</dd>
        <dt>Permissions</dt>
        <dd>{r.permissions.length ? r.permissions.map((p) => <code key={p} className="perm">{p}</code>) : 'none'}</dd>
        <dt>Checksum</dt>
        <dd>
          <code data-testid="dryrun-checksum">{r.checksum || '— (not publishable)'}</code>
        </dd>
        <dt>History</dt>
        <dd>≤ {r.estimatedHistoryEvents} events per run</dd>
        <dt>Limits</dt>
        <dd className="small">
          {Object.entries(r.limits)
            .map(([k, v]) => `${k} ${v}`)
            .join(' · ')}
        </dd>
      </dl>
    </div>
  );
}

function JsonPanel({ doc, onApply }: { doc: Graph; onApply(g: Graph): void }) {
  const text = JSON.stringify(doc, null, 2);
  const [draft, setDraft] = useState(text);
  const [err, setErr] = useState<string | null>(null);
  useEffect(() => setDraft(text), [text]);
  return (
    <div className="panel" data-testid="json-panel">
      <div className="panel-sub">The document as the server stores it. Edit and apply: the canvas follows.</div>
      <textarea rows={24} className="json-text" spellCheck={false} value={draft} onChange={(e) => setDraft(e.target.value)} data-testid="json-text" />
      {err && <div className="error-inline">{err}</div>}
      <button
        type="button"
        className="btn"
        data-testid="json-apply"
        onClick={() => {
          const v = safeParse(draft);
          if (!v || typeof v !== 'object' || Array.isArray(v)) {
            setErr('not a JSON object');
            return;
          }
          setErr(null);
          onApply(v as Graph);
        }}
      >
        Apply
      </button>
    </div>
  );
}

/**
 * The saved draft as the server's YAML export writes it (what `weft pull`
 * reads). Saving it sends the YAML itself as the next draft; the editor
 * then reloads, so the canvas shows what the server read.
 */
function YamlPanel({ workflowKey, revision, dirty, onSaved }: { workflowKey: string; revision: number; dirty: boolean; onSaved(): void }) {
  const { client } = useSession();
  const [load] = useLoad(() => client.getDraftYAML(workflowKey, revision), [workflowKey, revision]);
  const [text, setText] = useState<string | null>(null);
  const [err, setErr] = useState<string | null>(null);
  return (
    <div className="panel" data-testid="yaml-panel">
      <div className="panel-sub">Draft r{revision} as the server exports it (what <code>weft pull</code> reads). Saving it makes the next draft.</div>
      {dirty && <div className="error-inline">The canvas has unsaved changes: save them to see them here.</div>}
      <Loaded load={load} what="the YAML">
        {(yaml: string) => (
          <>
            <textarea rows={24} className="json-text" spellCheck={false} value={text ?? yaml} onChange={(e) => setText(e.target.value)} data-testid="yaml-text" />
            {err && <div className="error-box" data-testid="yaml-error">{err}</div>}
            <button
              type="button"
              className="btn"
              disabled={dirty || text === null || text === yaml}
              data-testid="yaml-save"
              onClick={() =>
                client.saveDraftYAML(workflowKey, revision, text ?? yaml).then(onSaved, (e: unknown) => {
                  const a = asApiError(e);
                  setErr(`${a.code}: ${a.message}`);
                })
              }
            >
              Save YAML as draft r{revision + 1}
            </button>
          </>
        )}
      </Loaded>
    </div>
  );
}

function DiffView({ diff }: { diff: GraphDiff }) {
  const none = !diff.addedNodes.length && !diff.removedNodes.length && !diff.changedNodes.length && !diff.addedEdges.length && !diff.removedEdges.length;
  if (none) return <div className="muted" data-testid="diff-none">No changes.</div>;
  const edge = (e: GraphEdge) => `${e.from} → ${e.to}`;
  return (
    <ul className="diff" data-testid="diff">
      {diff.addedNodes.map((id) => (
        <li key={`an${id}`} className="diff-add" data-diff="node-added">
          + node {id}
        </li>
      ))}
      {diff.removedNodes.map((id) => (
        <li key={`rn${id}`} className="diff-del" data-diff="node-removed">
          − node {id}
        </li>
      ))}
      {diff.changedNodes.map((id) => (
        <li key={`cn${id}`} className="diff-chg" data-diff="node-changed">
          ~ node {id} <span className="muted">({diff.changedFields[id]?.join(', ')})</span>
        </li>
      ))}
      {diff.addedEdges.map((e) => (
        <li key={`ae${edge(e)}`} className="diff-add" data-diff="edge-added">
          + edge {edge(e)}
        </li>
      ))}
      {diff.removedEdges.map((e) => (
        <li key={`re${edge(e)}`} className="diff-del" data-diff="edge-removed">
          − edge {edge(e)}
        </li>
      ))}
    </ul>
  );
}

function ConflictView({ mine, myRevision, theirs, onReload, onOverwrite }: { mine: Graph; myRevision: number; theirs: WorkflowDetail; onReload(): void; onOverwrite(): void }) {
  const diff = diffGraphs(theirs.draft.graph, mine);
  return (
    <div className="conflict error-box" role="alert" data-testid="conflict">
      <div className="state-title">Not saved: someone saved first</div>
      <p>
        You edited draft r{myRevision}; <strong data-testid="conflict-who">{theirs.draft.savedBy}</strong> saved draft{' '}
        <strong data-testid="conflict-revision">r{theirs.draft.revision}</strong> at {formatTime(theirs.draft.savedAt)}. Nothing was overwritten. Your
        version differs from theirs by:
      </p>
      <DiffView diff={diff} />
      <details>
        <summary>Your version (copy it before reloading)</summary>
        <textarea readOnly rows={10} className="json-text" value={JSON.stringify(mine, null, 2)} data-testid="conflict-mine" />
      </details>
      <div className="editor-actions">
        <button type="button" className="btn btn-primary" onClick={onReload} data-testid="conflict-reload">
          Reload r{theirs.draft.revision}
        </button>
        <button type="button" className="btn" onClick={onOverwrite} data-testid="conflict-overwrite">
          Save mine as r{theirs.draft.revision + 1}
        </button>
      </div>
    </div>
  );
}

function FixtureRow({ node, value, onChange }: { node: GraphNode; value: Record<string, unknown>; onChange(v: Record<string, unknown>): void }) {
  const [out, setOut] = useState(value.output === undefined ? '' : JSON.stringify(value.output));
  const set = (k: string, v: unknown) => {
    const next = { ...value };
    if (v === undefined || v === '') delete next[k];
    else next[k] = v;
    onChange(next);
  };
  return (
    <fieldset className="field-set" data-testid={`fixture-${node.id}`}>
      <legend>
        {node.id} <span className="muted">{KIND_LABEL[node.kind]}</span>
      </legend>
      {node.kind !== 'approval' && (
        <label className="field">
          Output (JSON)
          <input
            value={out}
            spellCheck={false}
            data-testid={`fixture-output-${node.id}`}
            onChange={(e) => {
              setOut(e.target.value);
              set('output', e.target.value === '' ? undefined : safeParse(e.target.value));
            }}
          />
        </label>
      )}
      {node.kind === 'agent-decision' && (
        <label className="field field-inline">
          Outcome
          <select value={String(value.outcome ?? '')} onChange={(e) => set('outcome', e.target.value)}>
            <option value="">pass (default)</option>
            <option value="pass">pass</option>
            <option value="fail">fail</option>
          </select>
        </label>
      )}
      {node.kind === 'approval' && (
        <label className="field field-inline">
          Decision
          <select value={String(value.decision ?? '')} onChange={(e) => set('decision', e.target.value)}>
            <option value="">approve (default)</option>
            <option value="approve">approve</option>
            <option value="reject">reject</option>
            <option value="timeout">timeout</option>
          </select>
        </label>
      )}
      <label className="field field-inline">
        Error
        <input
          placeholder="none"
          value={String((value.error as { message?: string } | undefined)?.message ?? '')}
          onChange={(e) => set('error', e.target.value ? { message: e.target.value } : undefined)}
          data-testid={`fixture-error-${node.id}`}
        />
      </label>
      <label className="field field-inline">
        Duration (ms)
        <input
          type="number"
          value={value.durationMs === undefined ? '' : String(value.durationMs)}
          onChange={(e) => set('durationMs', e.target.value === '' ? undefined : Number(e.target.value))}
          data-testid={`fixture-duration-${node.id}`}
        />
      </label>
    </fieldset>
  );
}

function newIdempotencyKey(): string {
  return typeof crypto !== 'undefined' && 'randomUUID' in crypto ? crypto.randomUUID() : `${Date.now()}-${Math.random().toString(36).slice(2)}`;
}

function SimulatePanel({ workflowKey, doc, dirty, revision, onRun }: { workflowKey: string; doc: Graph; dirty: boolean; revision: number; onRun(id: string): void }) {
  const { client } = useSession();
  const [input, setInput] = useState('{}');
  const [fixtures, setFixtures] = useState<Record<string, Record<string, unknown>>>({});
  const [err, setErr] = useState<string | null>(null);
  const simulated = doc.nodes.filter((n) => n.kind === 'action' || n.kind === 'agent' || n.kind === 'agent-decision' || n.kind === 'approval');
  return (
    <div className="panel" data-testid="simulate-panel">
      <div className="panel-sub">Simulate saved draft r{revision}: nothing is called; each fixture answers for its node.</div>
      {dirty && <div className="error-inline">Save first: a simulation runs a saved draft.</div>}
      <label className="field">
        Input (JSON)
        <textarea rows={3} value={input} onChange={(e) => setInput(e.target.value)} data-testid="simulate-input" spellCheck={false} />
      </label>
      {simulated.map((n) => (
        <FixtureRow key={n.id} node={n} value={fixtures[n.id] ?? {}} onChange={(v) => setFixtures({ ...fixtures, [n.id]: v })} />
      ))}
      {err && <div className="error-box" data-testid="simulate-error">{err}</div>}
      <button
        type="button"
        className="btn btn-primary"
        disabled={dirty}
        data-testid="simulate"
        onClick={() => {
          const v = safeParse(input);
          if (v === undefined) {
            setErr('the input is not JSON');
            return;
          }
          const fx = Object.fromEntries(Object.entries(fixtures).filter(([, f]) => Object.keys(f).length > 0));
          client
            .enqueueRun(workflowKey, { input: v, mode: 'simulation', draftRevision: revision, fixtures: fx, idempotencyKey: newIdempotencyKey() })
            .then((r) => onRun(r.runId), (e: unknown) => setErr(asApiError(e).message));
        }}
      >
        Simulate
      </button>
    </div>
  );
}

function PublishPanel({
  w,
  doc,
  dirty,
  revision,
  verdict,
  catalog,
  onRun,
}: {
  w: WorkflowDetail;
  doc: Graph;
  dirty: boolean;
  revision: number;
  verdict: Verdict | null;
  catalog: Catalog;
  onRun(id: string): void;
}) {
  const { client } = useSession();
  const [latest] = useLoad(async () => (w.publishedRevision ? client.getRevision(w.key, w.publishedRevision) : null), [w.key, w.publishedRevision]);
  const [result, setResult] = useState<{ revision: number; checksum: string } | null>(null);
  const [err, setErr] = useState<string | null>(null);
  const [input, setInput] = useState('{}');
  const r = verdict?.result;
  const ready = !dirty && verdict?.source === 'dry-run' && verdict.draftRevision === revision;
  return (
    <div className="panel" data-testid="publish-panel">
      <div className="panel-sub">Publish draft r{revision} as an immutable revision.</div>
      {dirty && <div className="error-inline">Save first: publication takes a saved draft.</div>}
      {r && (
        <dl className="kv">
          <dt>Checksum</dt>
          <dd>
            <code data-testid="publish-checksum">{r.checksum || '— (the draft has issues)'}</code>
          </dd>
          <dt>Pinned</dt>
          <dd data-testid="publish-deps">
            {r.references.actions.map((a) => {
              const c = catalog.actions.find((x) => x.id === a.id && x.version === a.version);
              return (
                <div key={`${a.id}@${a.version}`}>
                  action <code>
                    {a.id}@{a.version}
                  </code>{' '}
                  {c && <span className="muted">risk {c.risk}{c.requiredPermissions?.length ? `, needs ${c.requiredPermissions.join(', ')}` : ''}</span>}
                </div>
              );
            })}
            {r.references.agents.map((a) => (
              <div key={`${a.key}@${a.revision}`}>
                agent <code>
                  {a.key} r{a.revision}
                </code>
              </div>
            ))}
            {!r.references.actions.length && !r.references.agents.length && 'nothing'}
          </dd>
          <dt>Permissions</dt>
          <dd>{r.permissions.length ? r.permissions.map((p) => <code key={p} className="perm">{p}</code>) : 'none'}</dd>
        </dl>
      )}
      <h3>Changes against {w.publishedRevision ? `r${w.publishedRevision}` : 'nothing published yet'}</h3>
      <Loaded load={latest} what="latest revision">
        {(rev) => <DiffView diff={diffGraphs(rev ? rev.graph : null, doc)} />}
      </Loaded>
      {err && <div className="error-box" data-testid="publish-error">{err}</div>}
      {!result && (
        <button
          type="button"
          className="btn btn-primary"
          disabled={!ready}
          data-testid="publish"
          onClick={() =>
            client.publish(w.key, revision).then(
              (p) => setResult({ revision: p.revision, checksum: p.checksum }),
              (e: unknown) => {
                const a = asApiError(e);
                const list = Array.isArray(a.details.issues) ? (a.details.issues as Issue[]).map((i) => `${i.code} ${i.path}: ${i.message}`).join('\n') : '';
                setErr(`${a.code}: ${a.message}${list ? `\n${list}` : ''}`);
              },
            )
          }
        >
          Publish r{revision}
        </button>
      )}
      {result && (
        <div className="info-box" data-testid="published">
          Published <Link to={{ name: 'revision', key: w.key, revision: result.revision }}>r{result.revision}</Link> · checksum{' '}
          <code>{result.checksum.slice(0, 12)}</code>
          <label className="field">
            Run input (JSON)
            <textarea rows={3} value={input} onChange={(e) => setInput(e.target.value)} data-testid="run-input" spellCheck={false} />
          </label>
          <button
            type="button"
            className="btn btn-primary"
            data-testid="start-run"
            onClick={() => {
              const v = safeParse(input);
              if (v === undefined) {
                setErr('the input is not JSON');
                return;
              }
              client.enqueueRun(w.key, { input: v, revision: result.revision, idempotencyKey: newIdempotencyKey() }).then(
                (x) => onRun(x.runId),
                (e: unknown) => setErr(asApiError(e).message),
              );
            }}
          >
            Start a live run
          </button>
        </div>
      )}
    </div>
  );
}

/** /ui/new: a new workflow from scratch or from a bundled example. */
export function NewWorkflowPage() {
  const { client, navigate } = useSession();
  const [key, setKey] = useState('');
  const [from, setFrom] = useState('scratch');
  const [err, setErr] = useState<ApiError | null>(null);
  return (
    <div className="page">
      <div className="page-head">
        <div>
          <div className="crumbs">
            <Link to={{ name: 'workflows' }}>Workflows</Link> /
          </div>
          <h1>New workflow</h1>
        </div>
      </div>
      <form
        className="new-workflow"
        data-testid="new-workflow"
        onSubmit={(e) => {
          e.preventDefault();
          const g = from === 'scratch' ? emptyGraph() : EXAMPLES[from].graph;
          client.createWorkflow(key.trim(), g).then(
            (r) => navigate({ name: 'edit', key: r.key }),
            (e2: unknown) => setErr(asApiError(e2)),
          );
        }}
      >
        <label className="field">
          Key (lowercase letters, digits and -)
          <input value={key} onChange={(e) => setKey(e.target.value)} data-testid="new-key" required spellCheck={false} />
        </label>
        <fieldset className="field-set">
          <legend>Start from</legend>
          <label className="field-inline">
            <input type="radio" name="from" value="scratch" checked={from === 'scratch'} onChange={() => setFrom('scratch')} data-testid="from-scratch" /> an empty graph
          </label>
          {Object.entries(EXAMPLES).map(([k, ex]) => (
            <label key={k} className="field-inline">
              <input type="radio" name="from" value={k} checked={from === k} onChange={() => setFrom(k)} data-testid={`from-${k}`} /> {ex.label}
            </label>
          ))}
        </fieldset>
        {err && <ErrorState error={err} what="workflow" />}
        <button type="submit" className="btn btn-primary" data-testid="create">
          Create and edit
        </button>
      </form>
    </div>
  );
}
