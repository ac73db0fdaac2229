import { describe, expect, it } from 'vitest';
import { parseRoute, routePath, type Route } from './router';

describe('routes', () => {
  it('parses every deep link and builds it back', () => {
    const cases: [string, Route][] = [
      ['/ui/workflows', { name: 'workflows' }],
      ['/ui/workflows/quickstart', { name: 'workflow', key: 'quickstart' }],
      ['/ui/workflows/quickstart/revisions/3', { name: 'revision', key: 'quickstart', revision: 3 }],
      ['/ui/workflows/quickstart/edit', { name: 'edit', key: 'quickstart' }],
      ['/ui/new', { name: 'new' }],
      ['/ui/runs', { name: 'runs', filter: {} }],
      ['/ui/runs/2fb67755-be03-49b6-8cf8-065d1999b931', { name: 'run', runId: '2fb67755-be03-49b6-8cf8-065d1999b931' }],
      ['/ui/replays/rpl_5c0e9a7d-3b1f-4c2e-9d0a-1e2f3a4b5c6d', { name: 'replay', replayId: 'rpl_5c0e9a7d-3b1f-4c2e-9d0a-1e2f3a4b5c6d' }],
    ];
    for (const [path, route] of cases) {
      expect(parseRoute(path)).toEqual(route);
      expect(routePath(route)).toBe(path);
    }
  });

  it('keeps run filters in the query', () => {
    const r = parseRoute('/ui/runs', '?workflowKey=diamond&status=failed&mode=simulation&junk=1');
    expect(r).toEqual({ name: 'runs', filter: { workflowKey: 'diamond', status: 'failed', mode: 'simulation' } });
    expect(routePath(r)).toBe('/ui/runs?workflowKey=diamond&status=failed&mode=simulation');
  });

  it('sends the root to workflows and anything else to not found', () => {
    expect(parseRoute('/ui/')).toEqual({ name: 'workflows' });
    expect(parseRoute('/ui')).toEqual({ name: 'workflows' });
    expect(parseRoute('/ui/workflows/k/revisions/0').name).toBe('notFound');
    expect(parseRoute('/ui/nope').name).toBe('notFound');
    expect(parseRoute('/ui/replays').name).toBe('notFound');
  });
});
