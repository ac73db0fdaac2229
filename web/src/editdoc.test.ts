import { describe, expect, it } from 'vitest';
import {
  addEdge,
  addNode,
  diffGraphs,
  edgeIssues,
  emptyGraph,
  freshId,
  insertVariable,
  issueTarget,
  openBraces,
  pinIssues,
  pointerOptions,
  removeNode,
  removePort,
  setMapping,
  starterNode,
  templateParts,
} from './editdoc';
import type { Graph } from './types';

const g: Graph = {
  schemaVersion: 1,
  schemas: { Item: { type: 'object', properties: { id: { type: 'string' }, owner: { type: 'object', properties: { name: { type: 'string' } } } } } },
  nodes: [
    { id: 'in', kind: 'input', outputs: { out: 'Item' } },
    { id: 'check', kind: 'gate', inputs: { in: 'Item' }, outputs: { pass: 'Item', fail: 'Item' }, language: 'cel/v1', expression: 'true' },
    { id: 'out', kind: 'output', inputs: { in: 'any' } },
  ],
  edges: [
    { from: 'in.out', to: 'check.in' },
    { from: 'check.pass', to: 'out.in' },
  ],
};

describe('document edits', () => {
  it('adds nodes with fresh ids and removes a node with its edges', () => {
    expect(freshId(g, 'check')).toBe('check-2');
    expect(freshId(g, 'gate')).toBe('gate');
    expect(freshId(g, 'core.echo!')).toBe('core-echo');
    const h = addNode(g, starterNode('merge', 'join'));
    expect(h.nodes.map((n) => n.id)).toEqual(['in', 'check', 'out', 'join']);
    expect(g.nodes).toHaveLength(3); // never mutated
    const r = removeNode(g, 'check');
    expect(r.nodes.map((n) => n.id)).toEqual(['in', 'out']);
    expect(r.edges).toEqual([]);
  });

  it('adds an edge once and removes a port with the edges using it', () => {
    const e = { from: 'check.fail', to: 'out.in' };
    const h = addEdge(g, e);
    expect(h.edges).toHaveLength(3);
    expect(addEdge(h, e)).toBe(h);
    const r = removePort(h, 'out', 'inputs', 'in');
    expect(r.nodes.find((n) => n.id === 'out')?.inputs).toEqual({});
    expect(r.edges).toEqual([{ from: 'in.out', to: 'check.in' }]);
  });

  it('sets and removes mapping entries, dropping an empty mapping', () => {
    let h = setMapping(g, 'check', 'title', { template: 'x {{ a }}' });
    expect(h.nodes[1].mapping).toEqual({ title: { template: 'x {{ a }}' } });
    h = setMapping(h, 'check', 'title', undefined);
    expect('mapping' in h.nodes[1]).toBe(false);
  });

  it('starts every kind with the ports the server expects to find', () => {
    for (const k of ['input', 'output', 'gate', 'validator', 'merge', 'approval', 'action', 'agent', 'agent-decision'] as const) {
      expect(starterNode(k, 'x').kind).toBe(k);
    }
    expect(starterNode('gate', 'x').outputs).toEqual({ pass: 'any', fail: 'any' });
    expect(emptyGraph()).toEqual({ schemaVersion: 1, nodes: [], edges: [] });
  });
});

describe('issues on the canvas', () => {
  it('maps a JSON pointer to its node, field or edge', () => {
    expect(issueTarget(g, '/nodes/1/expression')).toEqual({ kind: 'node', id: 'check', field: '/expression' });
    expect(issueTarget(g, '/nodes/0')).toEqual({ kind: 'node', id: 'in', field: '' });
    expect(issueTarget(g, '/nodes/2/mapping/a~1b/template')).toEqual({ kind: 'node', id: 'out', field: '/mapping/a/b/template' });
    expect(issueTarget(g, '/edges/1')).toEqual({ kind: 'edge', from: 'check.pass', to: 'out.in' });
    expect(issueTarget(g, '/edges/9')).toEqual({ kind: 'graph', field: '/edges/9' });
    expect(issueTarget(g, '/schemas/Item')).toEqual({ kind: 'graph', field: '/schemas/Item' });
  });

  it('groups issues by node and edge, and finds an edge by index', () => {
    const issues = [
      { code: 'CEL_COMPILE', path: '/nodes/1/expression', message: 'bad' },
      { code: 'INCOMPATIBLE_PORT', path: '/edges/0', message: 'Item vs Count' },
      { code: 'X', path: '/edges/10/to', message: 'other' },
      { code: 'MISSING_OUTPUT', path: '', message: 'no output' },
    ];
    const p = pinIssues(g, issues);
    expect(Object.keys(p.nodes)).toEqual(['check']);
    expect(p.edges['in.out->check.in']).toHaveLength(1);
    expect(p.graph.map((i) => i.code)).toEqual(['X', 'MISSING_OUTPUT']);
    expect(edgeIssues(issues, 1)).toEqual([]);
    expect(edgeIssues(issues, 10).map((i) => i.code)).toEqual(['X']);
    expect(edgeIssues(issues, 0).map((i) => i.code)).toEqual(['INCOMPATIBLE_PORT']);
  });
});

describe('templates and pointers', () => {
  it('splits a template into text and tokens', () => {
    expect(templateParts('Hi {{ user.name }}, item {{item.id}}!')).toEqual([
      { text: 'Hi ' },
      { token: 'user.name', raw: '{{ user.name }}' },
      { text: ', item ' },
      { token: 'item.id', raw: '{{item.id}}' },
      { text: '!' },
    ]);
    expect(templateParts('no tokens')).toEqual([{ text: 'no tokens' }]);
  });

  it('opens the variable menu after an unclosed {{ and inserts the chosen key', () => {
    expect(openBraces('a {{', 4)).toEqual({ start: 2, prefix: '' });
    expect(openBraces('a {{ cont', 9)).toEqual({ start: 2, prefix: 'cont' });
    expect(openBraces('a {{ x }} b', 11)).toBeNull();
    expect(openBraces('a { b', 5)).toBeNull();
    expect(insertVariable('a {{ cont tail', 9, 'context.user.displayName')).toEqual({ text: 'a {{ context.user.displayName }} tail', caret: 32 });
  });

  it('offers pointers from the input ports and their schemas', () => {
    expect(pointerOptions(g, g.nodes[1])).toEqual(['/in', '/in/id', '/in/owner', '/in/owner/name']);
    expect(pointerOptions(g, g.nodes[2])).toEqual(['/in']);
  });
});

describe('the publish diff', () => {
  it('lists nodes and edges added, removed and changed', () => {
    const after: Graph = {
      ...g,
      nodes: [g.nodes[0], { ...g.nodes[1], expression: 'input.id != ""' }, { id: 'fin', kind: 'output', inputs: { in: 'any' } }],
      edges: [g.edges[0], { from: 'check.pass', to: 'fin.in' }],
    };
    expect(diffGraphs(g, after)).toEqual({
      addedNodes: ['fin'],
      removedNodes: ['out'],
      changedNodes: ['check'],
      changedFields: { check: ['expression'] },
      addedEdges: [{ from: 'check.pass', to: 'fin.in' }],
      removedEdges: [{ from: 'check.pass', to: 'out.in' }],
    });
    expect(diffGraphs(null, g).addedNodes).toEqual(['in', 'check', 'out']);
    // Key order does not count as a change.
    const reordered: Graph = { ...g, nodes: g.nodes.map((n) => Object.fromEntries(Object.entries(n).reverse()) as typeof n) };
    expect(diffGraphs(g, reordered).changedNodes).toEqual([]);
  });
});
