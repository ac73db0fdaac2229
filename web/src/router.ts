// The canvas's routes. Every view has an address under /ui/ that survives a
// reload: the API answers every /ui/ path with the app (web/embed.go), and
// parseRoute picks the view from the path.

export const BASE = '/ui';

export type Route =
  | { name: 'workflows' }
  | { name: 'workflow'; key: string }
  | { name: 'edit'; key: string }
  | { name: 'new' }
  | { name: 'revision'; key: string; revision: number }
  | { name: 'runs'; filter: { workflowKey?: string; status?: string; mode?: string } }
  | { name: 'run'; runId: string }
  | { name: 'replay'; replayId: string }
  | { name: 'notFound'; path: string };

export function parseRoute(pathname: string, search = ''): Route {
  let p = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  p = p.replace(/\/+$/, '');
  const seg = p.split('/').filter(Boolean).map((s) => {
    try {
      return decodeURIComponent(s);
    } catch {
      return s;
    }
  });
  if (seg.length === 0) return { name: 'workflows' };
  if (seg.length === 1 && seg[0] === 'new') return { name: 'new' };
  if (seg[0] === 'workflows') {
    if (seg.length === 1) return { name: 'workflows' };
    if (seg.length === 2) return { name: 'workflow', key: seg[1] };
    if (seg.length === 3 && seg[2] === 'edit') return { name: 'edit', key: seg[1] };
    if (seg.length === 4 && seg[2] === 'revisions' && /^[1-9]\d*$/.test(seg[3])) {
      return { name: 'revision', key: seg[1], revision: Number(seg[3]) };
    }
  }
  if (seg[0] === 'runs') {
    if (seg.length === 1) {
      const q = new URLSearchParams(search);
      const filter: { workflowKey?: string; status?: string; mode?: string } = {};
      for (const k of ['workflowKey', 'status', 'mode'] as const) {
        const v = q.get(k);
        if (v) filter[k] = v;
      }
      return { name: 'runs', filter };
    }
    if (seg.length === 2) return { name: 'run', runId: seg[1] };
  }
  if (seg[0] === 'replays' && seg.length === 2) return { name: 'replay', replayId: seg[1] };
  return { name: 'notFound', path: pathname };
}

export function routePath(r: Route): string {
  const e = encodeURIComponent;
  switch (r.name) {
    case 'workflows':
      return `${BASE}/workflows`;
    case 'workflow':
      return `${BASE}/workflows/${e(r.key)}`;
    case 'revision':
      return `${BASE}/workflows/${e(r.key)}/revisions/${r.revision}`;
    case 'edit':
      return `${BASE}/workflows/${e(r.key)}/edit`;
    case 'new':
      return `${BASE}/new`;
    case 'runs': {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(r.filter)) if (v) q.set(k, v);
      const s = q.toString();
      return `${BASE}/runs${s ? `?${s}` : ''}`;
    }
    case 'run':
      return `${BASE}/runs/${e(r.runId)}`;
    case 'replay':
      return `${BASE}/replays/${e(r.replayId)}`;
    case 'notFound':
      return r.path;
  }
}
