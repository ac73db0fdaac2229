import { describe, expect, it } from 'vitest';
import { buildLayoutInput, layoutGraph, nodeHeight, portId, splitRef } from './layout';
import type { Graph } from './types';

const diamond: Graph = {
  schemaVersion: 1,
  schemas: { Item: { type: 'object' } },
  nodes: [
    { id: 'out', kind: 'output', inputs: { in: 'any' } },
    { id: 'in', kind: 'input', outputs: { out: 'Item' } },
    { id: 'check', kind: 'gate', inputs: { in: 'Item' }, outputs: { pass: 'Item', fail: 'Item' } },
    { id: 'left', kind: 'action', inputs: { in: 'Item' }, outputs: { out: 'any' } },
    { id: 'right', kind: 'action', inputs: { in: 'Item' }, outputs: { out: 'any' } },
    { id: 'join', kind: 'merge', inputs: { b: 'any', a: 'any' }, outputs: { out: 'any' } },
  ],
  edges: [
    { from: 'in.out', to: 'check.in' },
    { from: 'check.pass', to: 'left.in' },
    { from: 'check.fail', to: 'right.in' },
    { from: 'left.out', to: 'join.a' },
    { from: 'right.out', to: 'join.b' },
    { from: 'join.out', to: 'out.in' },
  ],
};
const order = ['in', 'check', 'left', 'right', 'join', 'out'];

describe('layout input', () => {
  it('has a node per graph node in compiled order, ports on their sides in name order', () => {
    const { graph, skipped } = buildLayoutInput(diamond, order);
    expect(skipped).toEqual([]);
    expect(graph.layoutOptions?.['elk.algorithm']).toBe('layered');
    expect(graph.children?.map((c) => c.id)).toEqual(order);
    const join = graph.children!.find((c) => c.id === 'join')!;
    expect(join.ports?.map((p) => [p.id, p.layoutOptions?.['elk.port.side'], p.layoutOptions?.['elk.port.index']])).toEqual([
      ['join.a', 'WEST', '1'], // ELK counts the west side bottom up
      ['join.b', 'WEST', '0'],
      ['join.out', 'EAST', '0'],
    ]);
    expect(join.layoutOptions?.['elk.portConstraints']).toBe('FIXED_ORDER');
    expect(join.height).toBe(nodeHeight(diamond.nodes[5]));
    expect(nodeHeight(diamond.nodes[2])).toBeGreaterThan(nodeHeight(diamond.nodes[1]));
  });

  it('connects edges port to port, sorted, and leaves out dangling ones (drafts may have them)', () => {
    const draft: Graph = { ...diamond, edges: [...diamond.edges, { from: 'ghost.out', to: 'out.in' }, { from: 'in.nope', to: 'check.in' }, { from: 'in.out', to: 'check.in' }] };
    const { graph, skipped } = buildLayoutInput(draft, order);
    expect(graph.edges?.map((e) => [e.sources[0], e.targets[0]])).toEqual([
      ['check.fail', 'right.in'], ['check.pass', 'left.in'], ['in.out', 'check.in'],
      ['join.out', 'out.in'], ['left.out', 'join.a'], ['right.out', 'join.b'],
    ]);
    expect(skipped).toEqual([{ from: 'ghost.out', to: 'out.in' }, { from: 'in.nope', to: 'check.in' }]);
  });

  it('keeps document order for nodes the order does not name', () => {
    const { graph } = buildLayoutInput(diamond);
    expect(graph.children?.map((c) => c.id)).toEqual(diamond.nodes.map((n) => n.id));
  });

  it('splits port references at the last dot', () => {
    expect(splitRef('a.b.out')).toEqual({ node: 'a.b', port: 'out' });
    expect(splitRef('nodot')).toBeNull();
    expect(portId('n', 'p')).toBe('n.p');
  });
});

describe('layered layout (ELK)', () => {
  it('places every edge left to right and the two branches apart', async () => {
    const { positions } = await layoutGraph(diamond, order);
    const x = (id: string) => positions[id].x;
    for (const e of diamond.edges) {
      expect(x(splitRef(e.from)!.node)).toBeLessThan(x(splitRef(e.to)!.node));
    }
    expect(x('left')).toBe(x('right'));
    expect(positions.left.y).not.toBe(positions.right.y);
  });

  it('follows the port order the canvas draws (top to bottom by name)', async () => {
    const { positions } = await layoutGraph(diamond, order);
    // check.fail, the gate's upper port, feeds right; check.pass feeds left.
    expect(positions.right.y < positions.left.y).toBe(true);
  });
});
