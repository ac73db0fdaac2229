// The shell: sign-in, navigation between the views, and the session every
// view uses. The API is the only authority: a 401 from any call returns to
// the sign-in screen, a 403 shows the denied state naming the scope.

import { useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { Client } from './api';
import { adoptFragmentToken, clearToken, readClaims, readToken, storeToken } from './auth';
import { EditorPage, NewWorkflowPage } from './editor';
import { RevisionPage, RunsPage, WorkflowPage, WorkflowsPage } from './pages';
import { parseRoute, routePath, type Route } from './router';
import { ReplayPage } from './replaypage';
import { RunPage } from './runpage';
import { Link, SessionContext, useNarrow, type Session } from './ui';

function currentRoute(): Route {
  return parseRoute(window.location.pathname, window.location.search);
}

export function App() {
  const [token, setToken] = useState<string | null>(() => readToken(window.sessionStorage));
  const [signOutReason, setSignOutReason] = useState<string | null>(null);
  const [route, setRoute] = useState<Route>(currentRoute);
  // Bumped when another token signs in, so every view loads again.
  const [generation, setGeneration] = useState(0);
  const narrow = useNarrow();
  const tokenRef = useRef(token);
  tokenRef.current = token;

  useEffect(() => {
    const on = () => setRoute(currentRoute());
    window.addEventListener('popstate', on);
    // A #token= link opened in a tab already on the canvas changes only
    // the fragment: no reload, so take the token here too.
    const onHash = () => {
      if (adoptFragmentToken(window.location, window.sessionStorage, window.history)) {
        setSignOutReason(null);
        setToken(readToken(window.sessionStorage));
        setGeneration((g) => g + 1);
      }
    };
    window.addEventListener('hashchange', onHash);
    return () => {
      window.removeEventListener('popstate', on);
      window.removeEventListener('hashchange', onHash);
    };
  }, []);

  const client = useMemo(() => new Client(() => tokenRef.current), []);
  const navigate = useCallback((to: Route | string, opts?: { replace?: boolean }) => {
    const path = typeof to === 'string' ? to : routePath(to);
    if (opts?.replace) window.history.replaceState(null, '', path);
    else window.history.pushState(null, '', path);
    setRoute(currentRoute());
    if (!opts?.replace) window.scrollTo(0, 0);
  }, []);
  const signOut = useCallback((reason?: string) => {
    clearToken(window.sessionStorage);
    setToken(null);
    setSignOutReason(reason ?? null);
  }, []);
  const session: Session = useMemo(() => ({ client, navigate, signOut, narrow }), [client, navigate, signOut, narrow]);

  if (!token) {
    return (
      <SignIn
        reason={signOutReason}
        onToken={(t) => {
          setSignOutReason(null);
          setToken(t);
        }}
      />
    );
  }
  const claims = readClaims(token);
  return (
    <SessionContext.Provider value={session}>
      <div className={`app${narrow ? ' narrow' : ''}`} data-testid="app" data-read-mode={narrow ? 'true' : 'false'}>
        <header className="topbar">
          <Link to={{ name: 'workflows' }} className="brand">
            weft
          </Link>
          <nav>
            <Link to={{ name: 'workflows' }} className={route.name === 'workflows' || route.name === 'workflow' || route.name === 'revision' || route.name === 'edit' || route.name === 'new' || route.name === 'replay' ? 'active' : ''}>
              Workflows
            </Link>
            <Link to={{ name: 'runs', filter: {} }} className={route.name === 'runs' || route.name === 'run' ? 'active' : ''}>
              Runs
            </Link>
          </nav>
          <div className="who">
            {claims && (
              <span className="muted" title={(claims.scopes ?? []).join(' ')}>
                {claims.name || claims.sub} · {claims.tenant}
              </span>
            )}
            <button type="button" className="btn btn-quiet" onClick={() => signOut()} data-testid="sign-out">
              Sign out
            </button>
          </div>
        </header>
        {narrow && (
          <div className="read-mode" data-testid="read-mode" role="note">
            Read mode: this screen is narrow, so the canvas shows a readable list and changes nothing. Widen the window to explore
            the graph and to cancel runs.
          </div>
        )}
        <main key={`${generation}:${routePath(route)}`}>
          <View route={route} />
        </main>
      </div>
    </SessionContext.Provider>
  );
}

function View({ route }: { route: Route }) {
  switch (route.name) {
    case 'workflows':
      return <WorkflowsPage />;
    case 'workflow':
      return <WorkflowPage workflowKey={route.key} />;
    case 'edit':
      return <EditorPage workflowKey={route.key} />;
    case 'new':
      return <NewWorkflowPage />;
    case 'revision':
      return <RevisionPage workflowKey={route.key} revision={route.revision} />;
    case 'runs':
      return <RunsPage filter={route.filter} />;
    case 'run':
      return <RunPage runId={route.runId} />;
    case 'replay':
      return <ReplayPage replayId={route.replayId} />;
    case 'notFound':
      return (
        <div className="page">
          <div className="state state-error" data-testid="state-not-found">
            <div className="state-title">Nothing here</div>
            <div className="state-body">
              <code>{route.path}</code> is not a canvas address. <Link to={{ name: 'workflows' }}>Workflows</Link> ·{' '}
              <Link to={{ name: 'runs', filter: {} }}>Runs</Link>
            </div>
          </div>
        </div>
      );
  }
}

function SignIn({ reason, onToken }: { reason: string | null; onToken(t: string): void }) {
  const [value, setValue] = useState('');
  const [error, setError] = useState<string | null>(null);
  return (
    <div className="signin" data-testid="sign-in">
      <form
        className="signin-card"
        onSubmit={(e) => {
          e.preventDefault();
          const t = storeToken(window.sessionStorage, value);
          if (!t) {
            setError('Paste a token first.');
            return;
          }
          onToken(t);
        }}
      >
        <div className="brand big">weft</div>
        <h1>Sign in</h1>
        {reason && (
          <div className="error-box" data-testid="sign-in-reason">
            The API refused your token: {reason}
          </div>
        )}
        <p>
          Paste an API token. <code>make dev</code> prints a link that signs you in with the dev token; <code>weft token</code> mints
          others. The token stays in this tab's session storage and is only sent to this server.
        </p>
        <label htmlFor="token">Token</label>
        <textarea id="token" name="token" rows={4} value={value} onChange={(e) => setValue(e.target.value)} placeholder="eyJ…" spellCheck={false} autoComplete="off" />
        {error && <div className="error-inline">{error}</div>}
        <button type="submit" className="btn btn-primary">
          Sign in
        </button>
      </form>
    </div>
  );
}
