// Pure edits of a graph document for the editor, and the readings of the
// server's answers the editor shows. Nothing here decides whether a graph
// is valid: ports, edges, variables and expressions are judged by the
// server (POST /v1/graphs/check and the dry-run); these functions only
// build the document the user asked for and place the server's issues.

import { splitRef } from './layout';
import type { Graph, GraphEdge, GraphNode, Kind, MappingEntry } from './types';

/** The ports and fields a node of each kind starts with in the editor. */
export function starterNode(kind: Kind, id: string): GraphNode {
  switch (kind) {
    case 'input':
      return { id, kind, outputs: { out: 'any' } };
    case 'output':
      return { id, kind, inputs: { in: 'any' } };
    case 'gate':
      return { id, kind, inputs: { in: 'any' }, outputs: { pass: 'any', fail: 'any' }, language: 'cel/v1', expression: 'true' };
    case 'validator':
      return { id, kind, inputs: { in: 'any' }, outputs: { pass: 'any', fail: 'any' }, schema: { type: 'object' } };
    case 'merge':
      return { id, kind, inputs: { a: 'any', b: 'any' }, outputs: { out: 'any' } };
    case 'approval':
      return { id, kind, inputs: { in: 'any' }, outputs: { approved: 'any', rejected: 'any', timedOut: 'any' }, timeoutMs: 86_400_000 };
    case 'action':
      return { id, kind, inputs: { in: 'any' }, outputs: { out: 'any' } };
    case 'agent':
      return { id, kind, inputs: { in: 'any' }, outputs: { out: 'any' } };
    case 'agent-decision':
      return { id, kind, inputs: { in: 'any' }, outputs: { pass: 'any', fail: 'any' } };
  }
}

/** A node id not used in g: base, else base-2, base-3, ... */
export function freshId(g: Graph, base: string): string {
  const clean = base.replace(/[^A-Za-z0-9_-]+/g, '-').replace(/^-+|-+$/g, '') || 'node';
  const used = new Set(g.nodes.map((n) => n.id));
  if (!used.has(clean)) return clean;
  for (let i = 2; ; i++) if (!used.has(`${clean}-${i}`)) return `${clean}-${i}`;
}

export function addNode(g: Graph, n: GraphNode): Graph {
  return { ...g, nodes: [...g.nodes, n] };
}

/** Removes node id and every edge touching it. */
export function removeNode(g: Graph, id: string): Graph {
  return {
    ...g,
    nodes: g.nodes.filter((n) => n.id !== id),
    edges: g.edges.filter((e) => splitRef(e.from)?.node !== id && splitRef(e.to)?.node !== id),
  };
}

export function updateNode(g: Graph, id: string, f: (n: GraphNode) => GraphNode): Graph {
  return { ...g, nodes: g.nodes.map((n) => (n.id === id ? f(n) : n)) };
}

export function addEdge(g: Graph, e: GraphEdge): Graph {
  if (g.edges.some((x) => x.from === e.from && x.to === e.to)) return g;
  return { ...g, edges: [...g.edges, e] };
}

export function removeEdge(g: Graph, e: GraphEdge): Graph {
  return { ...g, edges: g.edges.filter((x) => !(x.from === e.from && x.to === e.to)) };
}

/** Removes a port of node id and the edges that used it. */
export function removePort(g: Graph, id: string, side: 'inputs' | 'outputs', port: string): Graph {
  const ref = `${id}.${port}`;
  const next = updateNode(g, id, (n) => {
    const ports = { ...(n[side] ?? {}) };
    delete ports[port];
    return { ...n, [side]: ports };
  });
  return { ...next, edges: next.edges.filter((e) => (side === 'inputs' ? e.to !== ref : e.from !== ref)) };
}

/** Sets (or, with undefined, removes) one mapping entry of node id. */
export function setMapping(g: Graph, id: string, field: string, entry: MappingEntry | undefined): Graph {
  return updateNode(g, id, (n) => {
    const m = { ...(n.mapping ?? {}) };
    if (entry === undefined) delete m[field];
    else m[field] = entry;
    const out: GraphNode = { ...n, mapping: m };
    if (Object.keys(m).length === 0) delete out.mapping;
    return out;
  });
}

/** What a JSON pointer of an issue points at in g. */
export type IssueTarget =
  | { kind: 'node'; id: string; field: string }
  | { kind: 'edge'; from: string; to: string }
  | { kind: 'graph'; field: string };

function unescapeToken(t: string): string {
  return t.replace(/~1/g, '/').replace(/~0/g, '~');
}

/** Places an issue path (/nodes/2/mapping/title/template, /edges/1, /schemas/Item) on g. */
export function issueTarget(g: Graph, path: string): IssueTarget {
  const seg = path.split('/').slice(1).map(unescapeToken);
  if (seg[0] === 'nodes' && seg.length >= 2 && /^\d+$/.test(seg[1])) {
    const n = g.nodes[Number(seg[1])];
    if (n) return { kind: 'node', id: n.id, field: seg.length > 2 ? '/' + seg.slice(2).join('/') : '' };
  }
  if (seg[0] === 'edges' && seg.length >= 2 && /^\d+$/.test(seg[1])) {
    const e = g.edges[Number(seg[1])];
    if (e) return { kind: 'edge', from: e.from, to: e.to };
  }
  return { kind: 'graph', field: path };
}

export interface Issue {
  code: string;
  path: string;
  message: string;
}

/** Issues grouped by node id and by edge key ("from->to"), the rest apart. */
export function pinIssues(g: Graph, issues: Issue[]): { nodes: Record<string, Issue[]>; edges: Record<string, Issue[]>; graph: Issue[] } {
  const out = { nodes: {} as Record<string, Issue[]>, edges: {} as Record<string, Issue[]>, graph: [] as Issue[] };
  for (const is of issues) {
    const t = issueTarget(g, is.path);
    if (t.kind === 'node') (out.nodes[t.id] ??= []).push(is);
    else if (t.kind === 'edge') (out.edges[`${t.from}->${t.to}`] ??= []).push(is);
    else out.graph.push(is);
  }
  return out;
}

/** The issues about the edge at index i of g (the server's path /edges/i...). */
export function edgeIssues(issues: Issue[], i: number): Issue[] {
  return issues.filter((is) => is.path === `/edges/${i}` || is.path.startsWith(`/edges/${i}/`));
}

/** One piece of a template: text, or a {{ variable }} token. */
export type TemplatePart = { text: string } | { token: string; raw: string };

/** Splits a template into text and {{ token }} parts, for display as pills. */
export function templateParts(s: string): TemplatePart[] {
  const out: TemplatePart[] = [];
  const re = /\{\{\s*([^{}]*?)\s*\}\}/g;
  let last = 0;
  for (let m = re.exec(s); m; m = re.exec(s)) {
    if (m.index > last) out.push({ text: s.slice(last, m.index) });
    out.push({ token: m[1], raw: m[0] });
    last = m.index + m[0].length;
  }
  if (last < s.length) out.push({ text: s.slice(last) });
  return out;
}

/** Whether the caret at pos sits right after an unclosed "{{" (the variable menu opens). */
export function openBraces(s: string, pos: number): { start: number; prefix: string } | null {
  const before = s.slice(0, pos);
  const i = before.lastIndexOf('{{');
  if (i < 0 || before.indexOf('}}', i) >= 0) return null;
  const prefix = before.slice(i + 2).trimStart();
  if (/[^A-Za-z0-9_.]/.test(prefix)) return null;
  return { start: i, prefix };
}

/** Replaces the open "{{prefix" before pos with "{{ key }}"; returns the text and the caret. */
export function insertVariable(s: string, pos: number, key: string): { text: string; caret: number } {
  const open = openBraces(s, pos);
  const start = open ? open.start : pos;
  const ins = `{{ ${key} }}`;
  return { text: s.slice(0, start) + ins + s.slice(pos), caret: start + ins.length };
}

/**
 * JSON pointers a mapping may read: for each input port of node, /port and,
 * following its schema's declared properties (from g.schemas), /port/prop...
 */
export function pointerOptions(g: Graph, node: GraphNode, depth = 3): string[] {
  const out: string[] = [];
  const walk = (schema: unknown, prefix: string, d: number) => {
    out.push(prefix);
    if (d <= 0 || !schema || typeof schema !== 'object') return;
    const props = (schema as { properties?: Record<string, unknown> }).properties;
    if (!props || typeof props !== 'object') return;
    for (const k of Object.keys(props).sort()) {
      walk(props[k], `${prefix}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`, d - 1);
    }
  };
  for (const [port, schemaName] of Object.entries(node.inputs ?? {}).sort(([a], [b]) => (a < b ? -1 : 1))) {
    walk(schemaName === 'any' ? undefined : g.schemas?.[schemaName], `/${port}`, depth);
  }
  return out;
}

/** What changed between two graphs, by node id and edge. */
export interface GraphDiff {
  addedNodes: string[];
  removedNodes: string[];
  changedNodes: string[];
  /** For each changed node, the fields that differ (expression, mapping, ...). */
  changedFields: Record<string, string[]>;
  addedEdges: GraphEdge[];
  removedEdges: GraphEdge[];
}

/** A canonical JSON text (object keys sorted), so equal values compare equal. */
export function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (v && typeof v === 'object') {
    return `{${Object.keys(v)
      .sort()
      .filter((k) => (v as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((v as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v);
}

export function diffGraphs(before: Graph | null, after: Graph): GraphDiff {
  const b = new Map((before?.nodes ?? []).map((n) => [n.id, n]));
  const a = new Map(after.nodes.map((n) => [n.id, n]));
  const key = (e: GraphEdge) => `${e.from}->${e.to}`;
  const be = new Set((before?.edges ?? []).map(key));
  const ae = new Set(after.edges.map(key));
  const changedNodes = [...a.keys()].filter((id) => b.has(id) && canonical(b.get(id)) !== canonical(a.get(id)));
  const changedFields: Record<string, string[]> = {};
  for (const id of changedNodes) {
    const x = b.get(id) as unknown as Record<string, unknown>;
    const y = a.get(id) as unknown as Record<string, unknown>;
    changedFields[id] = [...new Set([...Object.keys(x), ...Object.keys(y)])].filter((k) => canonical(x[k]) !== canonical(y[k])).sort();
  }
  return {
    addedNodes: [...a.keys()].filter((id) => !b.has(id)),
    removedNodes: [...b.keys()].filter((id) => !a.has(id)),
    changedNodes,
    changedFields,
    addedEdges: after.edges.filter((e) => !be.has(key(e))),
    removedEdges: (before?.edges ?? []).filter((e) => !ae.has(key(e))),
  };
}

/** An empty graph to start from. */
export function emptyGraph(): Graph {
  return { schemaVersion: 1, nodes: [], edges: [] };
}
