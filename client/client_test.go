package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// These tests pin the client's wire behaviour (paths, headers, bodies and
// error decoding) against a recording HTTP server; cmd/weft's
// TestClientVerbs drives it against a real `weft dev`.

type recorded struct {
	method, path, query, contentType, auth, body string
}

func server(t *testing.T, status int, answer string) (*Client, *[]recorded) {
	t.Helper()
	var got []recorded
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got = append(got, recorded{r.Method, r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Get("Content-Type"), r.Header.Get("Authorization"), string(b)})
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = io.WriteString(w, answer)
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL+"/", "tok")
	require.NoError(t, err)
	return c, &got
}

func TestNewRefusesNonHTTPURLs(t *testing.T) {
	for _, u := range []string{"", "localhost:8080", "ftp://x", "http://", "file:///tmp"} {
		_, err := New(u, "t")
		require.Error(t, err, u)
	}
	_, err := New(" https://weft.example.com/ ", "t")
	require.NoError(t, err)
}

func TestRequestsAndAnswers(t *testing.T) {
	ctx := context.Background()
	c, got := server(t, http.StatusCreated, `{"key":"k","draftRevision":1}`)
	d, err := c.CreateWorkflow(ctx, "k", json.RawMessage(`{"schemaVersion":1}`))
	require.NoError(t, err)
	require.Equal(t, Draft{Key: "k", DraftRevision: 1}, d)
	_, err = c.CreateWorkflowYAML(ctx, "k", []byte("schemaVersion: 1\n"))
	require.NoError(t, err)
	_, err = c.SaveDraft(ctx, "k", 3, json.RawMessage(`{}`))
	require.NoError(t, err)
	_, err = c.SaveDraftYAML(ctx, "k", 3, []byte("{}"))
	require.NoError(t, err)
	p, err := c.Publish(ctx, "k", 3)
	require.NoError(t, err)
	require.True(t, p.Created)
	_, err = c.Events(ctx, "a/b", "cur+sor", 10)
	require.NoError(t, err)
	_, err = c.ListRuns(ctx, RunFilter{WorkflowKey: "k", Status: "failed"})
	require.NoError(t, err)

	require.Equal(t, []recorded{
		{"POST", "/v1/workflows", "", "application/json", "Bearer tok", `{"graph":{"schemaVersion":1},"key":"k"}`},
		{"POST", "/v1/workflows", "key=k", "application/yaml", "Bearer tok", "schemaVersion: 1\n"},
		{"PUT", "/v1/workflows/k/draft", "", "application/json", "Bearer tok", `{"expectedRevision":3,"graph":{}}`},
		{"PUT", "/v1/workflows/k/draft", "expectedRevision=3", "application/yaml", "Bearer tok", "{}"},
		{"POST", "/v1/workflows/k/publish", "", "application/json", "Bearer tok", `{"expectedRevision":3}`},
		{"GET", "/v1/runs/a%2Fb/events", "cursor=cur%2Bsor&limit=10", "", "Bearer tok", ""},
		{"GET", "/v1/runs", "status=failed&workflowKey=k", "", "Bearer tok", ""},
	}, *got)
}

func TestCodedErrors(t *testing.T) {
	ctx := context.Background()
	c, _ := server(t, http.StatusUnprocessableEntity,
		`{"error":{"code":"INVALID_GRAPH","message":"draft revision 1 has 1 issue(s)","details":{"issues":[{"code":"CYCLE","path":"/edges/1","message":"loop"}]}}}`)
	_, err := c.Publish(ctx, "k", 1)
	var ce *Error
	require.ErrorAs(t, err, &ce)
	require.Equal(t, http.StatusUnprocessableEntity, ce.Status)
	require.Equal(t, "INVALID_GRAPH", ce.Code)
	require.Equal(t, "INVALID_GRAPH", Code(err))
	require.Equal(t, []graph.Issue{{Code: "CYCLE", Path: "/edges/1", Message: "loop"}}, ce.Issues())
	require.Contains(t, err.Error(), "INVALID_GRAPH: draft revision 1 has 1 issue(s)")

	c, _ = server(t, http.StatusNotFound, `{"error":{"code":"NOT_FOUND","message":"workflow \"k\" not found"}}`)
	_, err = c.GetWorkflow(ctx, "k")
	require.True(t, IsNotFound(err))
	require.Nil(t, err.(*Error).Issues())

	c, _ = server(t, http.StatusBadGateway, `<html>bad gateway</html>`)
	_, err = c.GetRun(ctx, "r")
	require.Equal(t, "HTTP_502", Code(err))
	require.Contains(t, err.Error(), "bad gateway")

	require.Equal(t, "", Code(errors.New("plain")))
}

func TestEventFollowerReturnsEachEventOnce(t *testing.T) {
	ctx := context.Background()
	pages := []string{
		`{"events":[{"seq":1,"type":"run.started"},{"seq":2,"type":"node.started"}],"nextCursor":"c2"}`,
		`{"events":[{"seq":3,"type":"node.completed"}],"nextCursor":null}`,
		// The next poll starts again from the last cursor and sees 3 again.
		`{"events":[{"seq":3,"type":"node.completed"},{"seq":4,"type":"run.succeeded"}],"nextCursor":null}`,
	}
	var cursors []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		cursors = append(cursors, r.URL.Query().Get("cursor"))
		_, _ = io.WriteString(w, pages[len(cursors)-1])
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "tok")
	require.NoError(t, err)
	f := c.FollowEvents("r")
	first, err := f.Next(ctx)
	require.NoError(t, err)
	require.Len(t, first, 3)
	second, err := f.Next(ctx)
	require.NoError(t, err)
	require.Len(t, second, 1)
	require.Equal(t, "run.succeeded", second[0].Type)
	require.Equal(t, []string{"", "c2", "c2"}, cursors)
	require.True(t, execution.Terminal(strings.TrimPrefix("run.succeeded", "run.")))
}

func TestRevocationRequests(t *testing.T) {
	ctx := context.Background()
	answer := `{"sub":"team/ops","scope":"notes.write","createdAt":"2025-01-02T03:04:05Z"}`
	c, posted := server(t, http.StatusCreated, answer)
	r, err := c.AddRevocation(ctx, "team/ops", "notes.write")
	require.NoError(t, err)
	require.True(t, r.Created)
	require.Equal(t, "team/ops", r.Sub)
	require.Equal(t, "notes.write", r.Scope)
	require.Equal(t, 2025, r.CreatedAt.Year())
	c2, _ := server(t, http.StatusOK, answer)
	r, err = c2.AddRevocation(ctx, "team/ops", "notes.write")
	require.NoError(t, err)
	require.False(t, r.Created, "200 means it already existed")
	require.Equal(t, []recorded{{"POST", "/v1/revocations", "", "application/json", "Bearer tok", `{"scope":"notes.write","sub":"team/ops"}`}}, *posted)

	c, got := server(t, http.StatusOK, `{"revocations":[{"sub":"a","scope":"runs.read","createdAt":"2025-01-02T03:04:05Z"}],"nextCursor":"n"}`)
	page, err := c.ListRevocations(ctx, RevocationFilter{Sub: "a b", Limit: 5, Cursor: "c+d"})
	require.NoError(t, err)
	require.Len(t, page.Revocations, 1)
	require.Equal(t, "runs.read", page.Revocations[0].Scope)
	require.Equal(t, "n", *page.NextCursor)
	_, err = c.ListRevocations(ctx, RevocationFilter{})
	require.NoError(t, err)

	c3, deleted := server(t, http.StatusNoContent, "")
	require.NoError(t, c3.RemoveRevocation(ctx, "team/ops 100%", "notes.write"))
	require.Equal(t, []recorded{
		{"GET", "/v1/revocations", "cursor=c%2Bd&limit=5&sub=a+b", "", "Bearer tok", ""},
		{"GET", "/v1/revocations", "", "", "Bearer tok", ""},
	}, *got)
	require.Equal(t, []recorded{{"DELETE", "/v1/revocations/team%2Fops%20100%25/notes.write", "", "", "Bearer tok", ""}}, *deleted)

	c4, _ := server(t, http.StatusNotFound, `{"error":{"code":"NOT_FOUND","message":"no revocation"}}`)
	require.True(t, IsNotFound(c4.RemoveRevocation(ctx, "a", "notes.write")))
}

func TestStreamEventsResumesWithLastEventID(t *testing.T) {
	ctx := context.Background()
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		require.Equal(t, "/v1/runs/r%201/events/stream", r.URL.EscapedPath())
		require.Equal(t, "Bearer tok", r.Header.Get("Authorization"))
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(seq int) string {
			return fmt.Sprintf("id: %d\ndata: {\"seq\":%d,\"type\":\"node.started\"}\n\n", seq, seq)
		}
		switch len(lastIDs) {
		case 1: // two events, a keep-alive, then the connection drops
			_, _ = io.WriteString(w, "retry: 1\n\n"+ev(1)+": keep-alive\n\n"+ev(2)+"id: 3\ndata: {\"seq\":3")
		default: // 2 again (the client skips it), 3, the end
			_, _ = io.WriteString(w, ev(2)+ev(3)+"event: end\ndata: {\"status\":\"succeeded\",\"lastSeq\":3}\n\n")
		}
	}))
	t.Cleanup(srv.Close)
	c, err := New(srv.URL, "tok")
	require.NoError(t, err)
	var seqs []int64
	end, err := c.StreamEvents(ctx, "r 1", 0, func(ev Event) error { seqs = append(seqs, ev.Seq); return nil })
	require.NoError(t, err)
	require.Equal(t, StreamEnd{Status: "succeeded", LastSeq: 3}, end)
	require.Equal(t, []int64{1, 2, 3}, seqs)
	require.Equal(t, []string{"0", "2"}, lastIDs)
}

func TestStreamEventsStopsOnARefusalOrTheCallersError(t *testing.T) {
	ctx := context.Background()
	c, _ := server(t, http.StatusTooManyRequests, `{"error":{"code":"TOO_MANY_STREAMS","message":"too many","details":{"limit":8}}}`)
	_, err := c.StreamEvents(ctx, "r", 0, func(Event) error { return nil })
	require.Equal(t, "TOO_MANY_STREAMS", Code(err))

	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "id: 5\ndata: {\"seq\":5}\n\n")
	}))
	t.Cleanup(srv.Close)
	c, err = New(srv.URL, "tok")
	require.NoError(t, err)
	stop := errors.New("enough")
	_, err = c.StreamEvents(ctx, "r", 4, func(Event) error { return stop })
	require.ErrorIs(t, err, stop)
}
