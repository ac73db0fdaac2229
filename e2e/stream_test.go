package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/api"
	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/internal/testinfra/inproc"
)

// napsGraph sleeps three times in a row, so its events arrive over about a
// second while a stream follows them.
const napsGraph = `{
  "schemaVersion": 1,
  "nodes": [
    {"id": "in", "kind": "input", "outputs": {"out": "any"}},
    {"id": "a", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1}, "mapping": {"ms": {"pointer": "/in/ms"}}},
    {"id": "b", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1}, "mapping": {"ms": {"literal": 300}}},
    {"id": "c", "kind": "action", "inputs": {"in": "any"}, "outputs": {"out": "any"}, "action": {"id": "core.sleep", "version": 1}, "mapping": {"ms": {"literal": 300}}},
    {"id": "out", "kind": "output", "inputs": {"in": "any"}}
  ],
  "edges": [{"from": "in.out", "to": "a.in"}, {"from": "a.out", "to": "b.in"}, {"from": "b.out", "to": "c.in"}, {"from": "c.out", "to": "out.in"}]
}`

// streamServer serves the API as production wires it for streams: an
// event feed (LISTEN/NOTIFY) and a stream registry of perToken streams per
// token, ended by the HTTP server's shutdown.
func (e *env) streamServer(perToken int) (*httptest.Server, *api.Streams) {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e.t.Cleanup(cancel)
	feed := e.st.NewEventFeed(e.log)
	go func() { _ = feed.Run(ctx) }()
	streams := api.NewStreams(feed, perToken)
	srv := httptest.NewUnstartedServer(inproc.API(e.t, api.Deps{Config: e.cfg, Store: e.st, Keys: e.keys, Temporal: e.tc,
		Starter: e.starter, Logger: e.log, Streams: streams}))
	srv.Config.RegisterOnShutdown(streams.Close)
	srv.Start()
	e.t.Cleanup(srv.Close)
	return srv, streams
}

// sseMessage is one message of the stream.
type sseMessage struct {
	id, event string
	data      []byte
}

// sseConn is one open stream.
type sseConn struct {
	resp   *http.Response
	cancel context.CancelFunc
	msgs   chan sseMessage
	done   chan error
}

// openStream opens GET /v1/runs/{id}/events/stream with header values (may
// be nil) and returns the open stream, or the refusal's status and body.
func openStream(t *testing.T, base, runID, token, query string, header map[string]string) (*sseConn, int, []byte) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/v1/runs/"+runID+"/events/stream"+query, nil)
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	if resp.StatusCode != http.StatusOK {
		defer cancel()
		defer resp.Body.Close()
		var body strings.Builder
		sc := bufio.NewScanner(resp.Body)
		for sc.Scan() {
			body.WriteString(sc.Text())
		}
		return nil, resp.StatusCode, []byte(body.String())
	}
	require.Equal(t, "text/event-stream; charset=utf-8", resp.Header.Get("Content-Type"))
	c := &sseConn{resp: resp, cancel: cancel, msgs: make(chan sseMessage, 1024), done: make(chan error, 1)}
	t.Cleanup(c.close)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		var m sseMessage
		for sc.Scan() {
			line := sc.Text()
			switch {
			case line == "":
				if m.data != nil {
					c.msgs <- m
				}
				m = sseMessage{}
			case strings.HasPrefix(line, ":"):
			case strings.HasPrefix(line, "id: "):
				m.id = strings.TrimPrefix(line, "id: ")
			case strings.HasPrefix(line, "event: "):
				m.event = strings.TrimPrefix(line, "event: ")
			case strings.HasPrefix(line, "data: "):
				m.data = []byte(strings.TrimPrefix(line, "data: "))
			}
		}
		close(c.msgs)
		c.done <- sc.Err()
	}()
	return c, http.StatusOK, nil
}

func (c *sseConn) close() {
	c.cancel()
	c.resp.Body.Close()
}

// next returns the next message, or ok=false when the stream closed.
func (c *sseConn) next(t *testing.T) (sseMessage, bool) {
	t.Helper()
	select {
	case m, ok := <-c.msgs:
		return m, ok
	case <-time.After(60 * time.Second):
		t.Fatal("no stream message within 60 s")
		return sseMessage{}, false
	}
}

// TestEventStreamResumesWithoutLossOrDuplicates: a client reads part of a
// live run's events, its connection drops, and it resumes with
// Last-Event-ID: together the two connections carry every event of the
// log exactly once, in seq order, identical to the paged events route,
// then `end` with the final status. ?after= resumes the same way.
func TestEventStreamResumesWithoutLossOrDuplicates(t *testing.T) {
	e := newEnv(t)
	e.startWorker()
	e.publish("naps", napsGraph)
	srv, _ := e.streamServer(0)
	id := e.run("naps", map[string]any{"ms": 400})

	// The first connection: a few events, then it drops mid-run.
	first, status, body := openStream(t, srv.URL, id, e.token, "", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var got []eventView
	for len(got) < 4 {
		m, ok := first.next(t)
		require.True(t, ok, "the stream closed early")
		require.Empty(t, m.event, "a run of three naps ended after %d events", len(got))
		var ev eventView
		require.NoError(t, json.Unmarshal(m.data, &ev))
		require.Equal(t, strconv.FormatInt(ev.Seq, 10), m.id, "the message id is the event's seq")
		got = append(got, ev)
	}
	first.close()
	last := got[len(got)-1].Seq

	// The second connection resumes after the last event it saw.
	second, status, body := openStream(t, srv.URL, id, e.token, "?after=1", map[string]string{"Last-Event-ID": strconv.FormatInt(last, 10)})
	require.Equal(t, http.StatusOK, status, "%s", body)
	var end map[string]any
	resumed := 0
	for {
		m, ok := second.next(t)
		require.True(t, ok, "the stream closed before its end message")
		if m.event == "end" {
			require.NoError(t, json.Unmarshal(m.data, &end))
			break
		}
		var ev eventView
		require.NoError(t, json.Unmarshal(m.data, &ev))
		got = append(got, ev)
		resumed++
	}
	_, open := second.next(t)
	require.False(t, open, "the stream stays open after end")
	require.Positive(t, resumed, "the drop happened after the run ended: nothing was resumed")

	all := e.events(id)
	require.Len(t, got, len(all), "lost or duplicated events")
	for i := range all {
		require.Equal(t, all[i].Seq, got[i].Seq)
		require.Equal(t, all[i].Hash, got[i].Hash, "event %d differs from the paged route", all[i].Seq)
		require.Equal(t, all[i].Type, got[i].Type)
	}
	require.Equal(t, "succeeded", all[len(all)-1].Type[len("run."):])
	require.Equal(t, map[string]any{"status": "succeeded", "lastSeq": float64(len(all))}, end)

	// ?after= (no header): exactly the events after it, then end.
	third, status, body := openStream(t, srv.URL, id, e.token, fmt.Sprintf("?after=%d", len(all)-2), nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	var tail []string
	for {
		m, ok := third.next(t)
		require.True(t, ok)
		tail = append(tail, m.id+m.event)
		if m.event == "end" {
			break
		}
	}
	require.Equal(t, []string{strconv.Itoa(len(all) - 1), strconv.Itoa(len(all)), "end"}, tail)

	// Once retention deleted the events, the stream ends at once.
	_, err := e.st.Pool.Exec(context.Background(), `UPDATE runs SET finished_at = now() - interval '2 days' WHERE run_id = $1`, id)
	require.NoError(t, err)
	// The sweep skips a run whose row another transaction holds (FOR
	// UPDATE SKIP LOCKED: the stream feed renewing the watches of the
	// streams just closed, say) and takes it at its next pass, so pass
	// until this run's events are gone.
	require.EventuallyWithT(t, func(c *assert.CollectT) {
		_, err := e.st.DeleteEventsOfRunsClosedBefore(context.Background(), time.Now().Add(-24*time.Hour))
		require.NoError(c, err)
		var deleted bool
		require.NoError(c, e.st.Pool.QueryRow(context.Background(),
			`SELECT events_deleted_at IS NOT NULL FROM runs WHERE run_id = $1`, id).Scan(&deleted))
		assert.True(c, deleted, "retention has not taken the run")
	}, 10*time.Second, 50*time.Millisecond)
	gone, status, body := openStream(t, srv.URL, id, e.token, "", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)
	m, ok := gone.next(t)
	require.True(t, ok)
	require.Equal(t, "end", m.event)
}

// TestEventStreamLimitsScopeAndShutdown: the stream keeps the events
// route's rules (a missing scope is 403, another tenant's run 404), bounds
// the streams one token holds open (429 TOO_MANY_STREAMS), and ends open
// streams when the server shuts down, so Shutdown does not wait on them.
func TestEventStreamLimitsScopeAndShutdown(t *testing.T) {
	e := newEnv(t)
	e.startWorker()
	e.publish("naps", napsGraph)
	srv, streams := e.streamServer(2)
	id := e.run("naps", map[string]any{"ms": 60000})

	_, status, body := openStream(t, srv.URL, id, e.mint(e.tenant, "bob", auth.ScopeWorkflowsRead), "", nil)
	require.Equal(t, http.StatusForbidden, status, "%s", body)
	require.Contains(t, string(body), `"missing":["runs.read"]`)
	_, status, _ = openStream(t, srv.URL, id, e.mint(e.other, "mallory", auth.AllScopes...), "", nil)
	require.Equal(t, http.StatusNotFound, status)
	_, status, body = openStream(t, srv.URL, id, e.token, "?after=x", nil)
	require.Equal(t, http.StatusBadRequest, status, "%s", body)

	a, status, _ := openStream(t, srv.URL, id, e.token, "", nil)
	require.Equal(t, http.StatusOK, status)
	b, status, _ := openStream(t, srv.URL, id, e.token, "", nil)
	require.Equal(t, http.StatusOK, status)
	_, status, body = openStream(t, srv.URL, id, e.token, "", nil)
	require.Equal(t, http.StatusTooManyRequests, status, "%s", body)
	require.Contains(t, string(body), `"code":"TOO_MANY_STREAMS"`)
	// Another token of the same user has its own allowance.
	c, status, _ := openStream(t, srv.URL, id, e.mint(e.tenant, "alice", auth.ScopeRunsRead), "", nil)
	require.Equal(t, http.StatusOK, status)
	// Closing one frees its place once the server notices.
	a.close()
	deadline := time.Now().Add(30 * time.Second)
	for streams.Open() > 2 {
		require.True(t, time.Now().Before(deadline), "a closed stream still counts after 30 s")
		time.Sleep(20 * time.Millisecond)
	}
	d, status, body := openStream(t, srv.URL, id, e.token, "", nil)
	require.Equal(t, http.StatusOK, status, "%s", body)

	// Shutdown ends the open streams (b, c, d): it returns well within its
	// deadline instead of waiting for a 60 s nap, and each client sees its
	// stream close.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, srv.Config.Shutdown(ctx), "shutdown waited on open streams")
	for _, s := range []*sseConn{b, c, d} {
		for {
			if _, ok := s.next(t); !ok {
				break
			}
		}
	}
	require.Zero(t, streams.Open())
	e.do(http.MethodPost, "/v1/runs/"+id+"/cancel", e.token, nil)
}
