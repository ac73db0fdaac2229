// A graph drawn with React Flow, laid out by ELK: nodes by kind with their
// ports labelled by schema, edges port to port, the compiled order, and
// (for a run) each node's live state and each edge's resolution. Narrow
// screens get GraphList instead: the same nodes as a readable list.

import { Background, Controls, Handle, Position, ReactFlow, type Edge, type Node, type NodeProps } from '@xyflow/react';
import { memo, useEffect, useMemo, useState } from 'react';
import { layoutGraph, NODE_WIDTH, nodeHeight, portsOf, splitRef } from './layout';
import { edgeKey, onDeadPath, type EdgeState, type NodeView } from './runstate';
import type { Graph, GraphNode } from './types';
import { StatusBadge } from './ui';

export const KIND_LABEL: Record<string, string> = {
  input: 'input',
  output: 'output',
  action: 'action',
  agent: 'agent',
  'agent-decision': 'agent decision',
  gate: 'gate',
  validator: 'validator',
  merge: 'merge',
  approval: 'approval',
};

/** What a node is pinned to or evaluates, in one line. */
export function nodeSubtitle(n: GraphNode): string {
  if (n.action) return `${n.action.id}@${n.action.version}`;
  if (n.agent) return `${n.agent.key} r${n.agent.revision}`;
  if (n.expression) return n.expression;
  if (typeof n.schema === 'string') return `schema ${n.schema}`;
  if (n.schema) return 'inline schema';
  if (n.kind === 'approval' && n.timeoutMs) return `waits up to ${waitLabel(n.timeoutMs)}`;
  return '';
}

/** A wait in the largest whole unit: 30 s, 15 min, 4 h, 7 d. */
export function waitLabel(ms: number): string {
  for (const [unit, size] of [['d', 86_400_000], ['h', 3_600_000], ['min', 60_000]] as const) {
    if (ms >= size && ms % size === 0) return `${ms / size} ${unit}`;
  }
  return `${Math.round(ms / 1000)} s`;
}

interface WeftNodeData extends Record<string, unknown> {
  node: GraphNode;
  view?: NodeView;
  step?: number;
  selected: boolean;
}

type WeftFlowNode = Node<WeftNodeData, 'weft'>;

const WeftNode = memo(function WeftNode({ data }: NodeProps<WeftFlowNode>) {
  const { node, view, step } = data;
  const { inputs, outputs } = portsOf(node);
  const rows = Math.max(inputs.length, outputs.length, 1);
  const dead = view ? onDeadPath(view) : false;
  const status = view?.status;
  return (
    <div
      className={`wnode kind-${node.kind}${status ? ` st-${status}` : ''}${dead ? ' dead-path' : ''}${data.selected ? ' selected' : ''}`}
      style={{ width: NODE_WIDTH, height: nodeHeight(node) }}
      data-node-id={node.id}
      data-status={status ?? ''}
      data-testid={`node-${node.id}`}
    >
      <div className="wnode-head">
        <span className="wnode-kind">{KIND_LABEL[node.kind] ?? node.kind}</span>
        {step !== undefined && (
          <span className="wnode-step" title="compiled order">
            #{step}
          </span>
        )}
        {view && view.recoveries.length > 0 && (
          <span className="badge recovered" data-testid={`recovered-${node.id}`} title="an attempt was re-dispatched after a lost worker or an infrastructure fault">
            recovered
          </span>
        )}
      </div>
      <div className="wnode-title">
        <span className="wnode-id">{node.id}</span>
        {view && <StatusBadge status={view.status} />}
      </div>
      <div className="wnode-sub" title={nodeSubtitle(node)}>
        {nodeSubtitle(node) || '\u00a0'}
        {view && view.attempt > 1 && <span className="wnode-attempt"> · attempt {view.attempt}</span>}
      </div>
      <div className="wnode-ports" style={{ height: rows * 20 }}>
        {inputs.map(([p, schema], i) => (
          <div key={`in-${p}`} className="port port-in" style={{ top: i * 20 }} title={`${p}: ${schema}`}>
            <Handle type="target" position={Position.Left} id={p} isConnectable={false} />
            <span className="port-name">{p}</span>
            <span className="port-schema">{schema}</span>
          </div>
        ))}
        {outputs.map(([p, schema], i) => (
          <div key={`out-${p}`} className={`port port-out${view?.port === p ? ' fired' : ''}`} style={{ top: i * 20 }} title={`${p}: ${schema}`}>
            <span className="port-schema">{schema}</span>
            <span className="port-name">{p}</span>
            <Handle type="source" position={Position.Right} id={p} isConnectable={false} />
          </div>
        ))}
      </div>
    </div>
  );
});

const nodeTypes = { weft: WeftNode };

export interface GraphViewProps {
  graph: Graph;
  order?: string[];
  views?: Record<string, NodeView>;
  edges?: Record<string, EdgeState>;
  selected?: string | null;
  onSelect?(id: string | null): void;
}

export function GraphView({ graph, order, views, edges, selected, onSelect }: GraphViewProps) {
  const [layout, setLayout] = useState<{ positions: Record<string, { x: number; y: number }>; skipped: { from: string; to: string }[] } | null>(null);
  const [layoutError, setLayoutError] = useState<string | null>(null);
  useEffect(() => {
    let live = true;
    setLayout(null);
    layoutGraph(graph, order ?? []).then(
      (l) => live && setLayout(l),
      (e: unknown) => live && setLayoutError(e instanceof Error ? e.message : String(e)),
    );
    return () => {
      live = false;
    };
  }, [graph, order]);

  const steps = useMemo(() => new Map((order ?? []).map((id, i) => [id, i + 1])), [order]);
  const rfNodes: WeftFlowNode[] = useMemo(() => {
    if (!layout) return [];
    return graph.nodes.map((n) => ({
      id: n.id,
      type: 'weft' as const,
      position: layout.positions[n.id] ?? { x: 0, y: 0 },
      data: { node: n, view: views?.[n.id], step: steps.get(n.id), selected: selected === n.id },
      draggable: false,
      connectable: false,
    }));
  }, [graph, layout, views, steps, selected]);
  const rfEdges: Edge[] = useMemo(() => {
    if (!layout) return [];
    const skipped = new Set(layout.skipped.map((e) => `${e.from}->${e.to}`));
    const out: Edge[] = [];
    for (const e of graph.edges) {
      const id = edgeKey(e.from, e.to);
      const from = splitRef(e.from);
      const to = splitRef(e.to);
      if (!from || !to || skipped.has(id)) continue;
      const st = edges?.[id];
      out.push({
        id,
        source: from.node,
        sourceHandle: from.port,
        target: to.node,
        targetHandle: to.port,
        className: st ? `edge-${st}` : views ? 'edge-open' : 'edge-static',
        animated: st === 'taken' && views?.[to.node]?.status === 'running',
        data: { state: st ?? '' },
      });
    }
    return out;
  }, [graph, layout, edges, views]);

  if (layoutError) return <div className="state state-error">Layout failed: {layoutError}</div>;
  return (
    <div className="canvas" data-testid="graph-canvas" data-laid-out={layout ? 'true' : 'false'}>
      {layout && (
        <ReactFlow
          nodes={rfNodes}
          edges={rfEdges}
          nodeTypes={nodeTypes}
          fitView
          fitViewOptions={{ padding: 0.12, maxZoom: 1.25 }}
          minZoom={0.2}
          nodesDraggable={false}
          nodesConnectable={false}
          edgesFocusable={false}
          onNodeClick={(_, n) => onSelect?.(n.id === selected ? null : n.id)}
          onPaneClick={() => onSelect?.(null)}
        >
          <Background gap={24} size={1} />
          <Controls showInteractive={false} />
        </ReactFlow>
      )}
      {layout && layout.skipped.length > 0 && (
        <div className="canvas-note">
          {layout.skipped.length} edge{layout.skipped.length > 1 ? 's name' : ' names'} a node or port the graph lacks (not drawn).
        </div>
      )}
    </div>
  );
}

/** Small screens: the graph's nodes as a list in compiled order, read only. */
export function GraphList({ graph, order, views }: { graph: Graph; order?: string[]; views?: Record<string, NodeView> }) {
  const byId = new Map(graph.nodes.map((n) => [n.id, n]));
  const ids = order && order.length ? [...order, ...graph.nodes.map((n) => n.id).filter((id) => !order.includes(id))] : graph.nodes.map((n) => n.id);
  return (
    <ol className="node-list" data-testid="node-list">
      {ids.map((id) => {
        const n = byId.get(id);
        if (!n) return null;
        const v = views?.[id];
        const incoming = graph.edges.filter((e) => splitRef(e.to)?.node === id).map((e) => e.from);
        return (
          <li key={id} className={`node-row kind-${n.kind}${v ? ` st-${v.status}` : ''}`} data-node-id={id} data-status={v?.status ?? ''}>
            <div className="node-row-head">
              <span className="wnode-kind">{KIND_LABEL[n.kind] ?? n.kind}</span>
              <span className="wnode-id">{id}</span>
              {v && <StatusBadge status={v.status} />}
              {v && v.recoveries.length > 0 && <span className="badge recovered">recovered</span>}
            </div>
            {nodeSubtitle(n) && <div className="node-row-sub">{nodeSubtitle(n)}</div>}
            {incoming.length > 0 && <div className="node-row-sub">from {incoming.join(', ')}</div>}
            {v?.error && (
              <div className="node-row-error">
                {v.reason}: {v.error}
              </div>
            )}
          </li>
        );
      })}
    </ol>
  );
}
