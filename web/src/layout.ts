// Automatic layered layout of a graph with ELK: buildLayoutInput turns a
// weft graph into ELK's input (a node per graph node, a port per node port,
// inputs on the left and outputs on the right in a fixed order, an edge per
// graph edge between ports), and layoutGraph runs ELK and returns positions.

import type { ElkNode, ElkExtendedEdge, ElkPort } from 'elkjs/lib/elk-api';
import type { Graph, GraphNode } from './types';

export const NODE_WIDTH = 196;
const HEADER_HEIGHT = 52;
const PORT_ROW = 20;
const FOOTER = 12;

/** Ports of a node, inputs and outputs, each in name order. */
export function portsOf(n: GraphNode): { inputs: [string, string][]; outputs: [string, string][] } {
  const sort = (m?: Record<string, string>) =>
    Object.entries(m ?? {}).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  return { inputs: sort(n.inputs), outputs: sort(n.outputs) };
}

export function nodeHeight(n: GraphNode): number {
  const { inputs, outputs } = portsOf(n);
  return HEADER_HEIGHT + PORT_ROW * Math.max(inputs.length, outputs.length, 1) + FOOTER;
}

/** The handle id of a port, as React Flow and ELK both name it. */
export function portId(nodeId: string, port: string): string {
  return `${nodeId}.${port}`;
}

/** Splits "node.port" at the last dot (node ids may hold dots, ports do not). */
export function splitRef(ref: string): { node: string; port: string } | null {
  const i = ref.lastIndexOf('.');
  if (i <= 0 || i === ref.length - 1) return null;
  return { node: ref.slice(0, i), port: ref.slice(i + 1) };
}

export interface LayoutInput {
  graph: ElkNode;
  /** Edges that name a node or port the graph lacks (a draft's dangling edge). */
  skipped: { from: string; to: string }[];
}

/**
 * ELK's input for g. order (the compiled order, when known) sorts the
 * nodes so the layout is stable and follows it; the rest keep document
 * order.
 */
export function buildLayoutInput(g: Graph, order: string[] = []): LayoutInput {
  const rank = new Map(order.map((id, i) => [id, i]));
  const nodes = g.nodes
    .map((n, i) => ({ n, i }))
    .sort((a, b) => (rank.get(a.n.id) ?? order.length + a.i) - (rank.get(b.n.id) ?? order.length + b.i))
    .map(({ n }) => n);
  const known = new Set<string>();
  const children: ElkNode[] = nodes.map((n) => {
    const { inputs, outputs } = portsOf(n);
    const ports: ElkPort[] = [
      // ELK numbers ports clockwise: down the east side, up the west
      // side. The canvas draws both sides top to bottom in name order.
      ...inputs.map(([p], i) => ({
        id: portId(n.id, p),
        width: 8,
        height: 8,
        layoutOptions: { 'elk.port.side': 'WEST', 'elk.port.index': String(inputs.length - 1 - i) },
      })),
      ...outputs.map(([p], i) => ({
        id: portId(n.id, p),
        width: 8,
        height: 8,
        layoutOptions: { 'elk.port.side': 'EAST', 'elk.port.index': String(i) },
      })),
    ];
    for (const p of ports) known.add(p.id);
    return {
      id: n.id,
      width: NODE_WIDTH,
      height: nodeHeight(n),
      ports,
      layoutOptions: { 'elk.portConstraints': 'FIXED_ORDER' },
    };
  });
  const edges: ElkExtendedEdge[] = [];
  const skipped: { from: string; to: string }[] = [];
  const seen = new Set<string>();
  const sorted = [...g.edges].sort((a, b) => (a.from + '\0' + a.to < b.from + '\0' + b.to ? -1 : 1));
  for (const e of sorted) {
    const id = `${e.from}->${e.to}`;
    if (!known.has(e.from) || !known.has(e.to) || seen.has(id)) {
      if (!seen.has(id)) skipped.push({ from: e.from, to: e.to });
      continue;
    }
    seen.add(id);
    edges.push({ id, sources: [e.from], targets: [e.to] });
  }
  return {
    graph: {
      id: 'root',
      layoutOptions: {
        'elk.algorithm': 'layered',
        'elk.direction': 'RIGHT',
        'elk.edgeRouting': 'SPLINES',
        'elk.layered.spacing.nodeNodeBetweenLayers': '56',
        'elk.spacing.nodeNode': '28',
        'elk.layered.nodePlacement.strategy': 'BRANDES_KOEPF',
        'elk.layered.considerModelOrder.strategy': 'NODES_AND_EDGES',
      },
      children,
      edges,
    },
    skipped,
  };
}

export interface Positioned {
  positions: Record<string, { x: number; y: number }>;
  width: number;
  height: number;
  skipped: { from: string; to: string }[];
}

type ElkLike = { layout(g: ElkNode): Promise<ElkNode> };

let elkInstance: Promise<ElkLike> | undefined;

async function elk(): Promise<ElkLike> {
  if (!elkInstance) {
    elkInstance = import('elkjs/lib/elk.bundled.js').then((m) => new m.default() as unknown as ElkLike);
  }
  return elkInstance;
}

/** Lays g out: positions by node id (top-left corners). */
export async function layoutGraph(g: Graph, order: string[] = [], engine?: ElkLike): Promise<Positioned> {
  const input = buildLayoutInput(g, order);
  const out = await (engine ?? (await elk())).layout(input.graph);
  const positions: Positioned['positions'] = {};
  for (const c of out.children ?? []) positions[c.id] = { x: c.x ?? 0, y: c.y ?? 0 };
  return { positions, width: out.width ?? 0, height: out.height ?? 0, skipped: input.skipped };
}
