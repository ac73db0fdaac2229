package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/store"
)

// CodeTooManyStreams refuses an event stream beyond the number one token
// may hold open at once (429).
const CodeTooManyStreams = "TOO_MANY_STREAMS"

// Event stream settings.
const (
	// DefaultStreamsPerToken bounds the event streams one token holds open
	// in one API process: a canvas watches one run per page, so a handful
	// covers a user's tabs while a runaway client cannot hold connections
	// without bound.
	DefaultStreamsPerToken = 8
	// streamPage is how many events one read of a stream fetches.
	streamPage = 500
	// streamRecheck is the safety-net re-read of a stream whose run was
	// not notified. The feed wakes every stream when it reconnects, so a
	// notification is lost only in rare cases; with no feed at all the
	// re-read is the only wake-up, hence much more often.
	streamRecheck       = 15 * time.Second
	streamRecheckNoFeed = time.Second
	// streamKeepAlive is how often an idle stream sends a comment line, so
	// proxies and load balancers do not close it as idle.
	streamKeepAlive = 15 * time.Second
	// streamRetryMs is the reconnection delay the stream suggests to
	// EventSource-style clients.
	streamRetryMs = 2000
)

// Streams holds the open event streams of one API process: it bounds them
// per token and ends them all when the server shuts down (http.Server's
// Shutdown waits for active requests, and a stream would hold a deploy
// up until the shutdown deadline).
type Streams struct {
	feed     *store.EventFeed
	perToken int
	recheck  time.Duration

	mu       sync.Mutex
	open     map[[sha256.Size]byte]int
	closed   bool
	shutdown chan struct{}
}

// NewStreams returns the stream registry. feed (may be nil) wakes streams
// when their run's events are appended; without it streams re-read every
// second. perToken <= 0 means DefaultStreamsPerToken.
func NewStreams(feed *store.EventFeed, perToken int) *Streams {
	if perToken <= 0 {
		perToken = DefaultStreamsPerToken
	}
	recheck := streamRecheck
	if feed == nil {
		recheck = streamRecheckNoFeed
	}
	return &Streams{feed: feed, perToken: perToken, recheck: recheck,
		open: map[[sha256.Size]byte]int{}, shutdown: make(chan struct{})}
}

// Close ends every open stream (each sends nothing more and returns, so
// the client reconnects elsewhere with Last-Event-ID) and refuses new ones
// with 503. Register it with http.Server.RegisterOnShutdown.
func (s *Streams) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closed {
		s.closed = true
		close(s.shutdown)
	}
}

// Open reports how many streams are open (tests, diagnostics).
func (s *Streams) Open() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for _, c := range s.open {
		n += c
	}
	return n
}

// acquire counts one more stream of token, refusing it past the limit.
func (s *Streams) acquire(token string) (release func(), err error) {
	key := sha256.Sum256([]byte(token))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, failure.New(failure.CodeUnavailable, "the server is shutting down; reconnect")
	}
	if s.open[key] >= s.perToken {
		return nil, failure.New(CodeTooManyStreams, "this token already holds %d open event streams; close one first", s.perToken).
			WithDetails(map[string]any{"limit": s.perToken})
	}
	s.open[key]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.open[key]--; s.open[key] <= 0 {
				delete(s.open, key)
			}
		})
	}, nil
}

// streamAfter reads where a stream resumes: the Last-Event-ID header (a
// reconnecting client's last seq) wins over ?after=; neither is 0, the
// beginning of the log.
func streamAfter(c echo.Context) (int64, error) {
	field, v := "Last-Event-ID", strings.TrimSpace(c.Request().Header.Get("Last-Event-ID"))
	if v == "" {
		field, v = "after", c.QueryParam("after")
	}
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return 0, failure.New(failure.CodeInvalidRequest, "%s must be an event seq (a non-negative integer)", field).
			WithDetails(map[string]any{"field": field})
	}
	return n, nil
}

// streamEnd is the data of the stream's last message (event: end).
type streamEnd struct {
	Status  string `json:"status"`
	LastSeq int64  `json:"lastSeq"`
}

// streamRunEvents handles GET /v1/runs/{id}/events/stream: the run's events
// as Server-Sent Events, from the seq after Last-Event-ID (or ?after=),
// live until the run's terminal event has been sent. Each message's id is
// the event's seq and its data the event as GET /v1/runs/{id}/events shows
// it; a last `end` message carries the run's final status. Events are read
// from the store by seq, so a resumed stream neither loses nor repeats one.
func (s *Server) streamRunEvents(c echo.Context) error {
	p := principal(c)
	r, err := s.tenantRun(c, p.Tenant)
	if err != nil {
		return err
	}
	after, err := streamAfter(c)
	if err != nil {
		return err
	}
	token, _ := strings.CutPrefix(c.Request().Header.Get("Authorization"), "Bearer ")
	release, err := s.streams.acquire(strings.TrimSpace(token))
	if err != nil {
		return err
	}
	defer release()

	// Subscribe before the first read: an append between the read and the
	// wait still leaves its wake-up pending.
	var wake <-chan struct{}
	if s.streams.feed != nil {
		ch, cancel := s.streams.feed.Subscribe(r.RunID)
		defer cancel()
		wake = ch
	}
	ctx := c.Request().Context()
	w := c.Response()
	h := w.Header()
	h.Set(echo.HeaderContentType, "text/event-stream; charset=utf-8")
	h.Set("Cache-Control", "no-cache, no-store")
	h.Set("X-Accel-Buffering", "no") // a buffering proxy would hold events back
	w.WriteHeader(http.StatusOK)
	var buf bytes.Buffer
	buf.WriteString("retry: " + strconv.Itoa(streamRetryMs) + "\n\n")
	send := func() error {
		if buf.Len() == 0 {
			return nil
		}
		if _, err := w.Write(buf.Bytes()); err != nil {
			return err
		}
		buf.Reset()
		return http.NewResponseController(w.Writer).Flush()
	}

	recheck := time.NewTicker(s.streams.recheck)
	defer recheck.Stop()
	keepAlive := time.NewTicker(streamKeepAlive)
	defer keepAlive.Stop()
	for {
		for {
			events, err := s.deps.Store.ListEvents(ctx, p.Tenant, r.RunID, after, streamPage)
			if err != nil {
				return s.endStream(ctx, err)
			}
			for _, ev := range events {
				data, err := json.Marshal(eventJSON(ev))
				if err != nil {
					return err
				}
				buf.WriteString("id: " + strconv.FormatInt(ev.Seq, 10) + "\ndata: ")
				buf.Write(data)
				buf.WriteString("\n\n")
				after = ev.Seq
			}
			if len(events) < streamPage {
				break
			}
			if err := send(); err != nil {
				return nil // the client went away
			}
		}
		progress, err := s.deps.Store.RunProgress(ctx, p.Tenant, r.RunID)
		if err != nil {
			return s.endStream(ctx, err)
		}
		// Ended: the run is terminal and its terminal event was sent (or
		// retention deleted its events, so nothing more will come).
		if execution.Terminal(progress.Status) && (after >= progress.LastSeq || progress.EventsDeleted) {
			end, _ := json.Marshal(streamEnd{Status: progress.Status, LastSeq: progress.LastSeq})
			buf.WriteString("event: end\ndata: ")
			buf.Write(end)
			buf.WriteString("\n\n")
			_ = send()
			return nil
		}
		if err := send(); err != nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.streams.shutdown:
			return nil
		case <-wake:
		case <-recheck.C:
		case <-keepAlive.C:
			buf.WriteString(": keep-alive\n\n")
		}
	}
}

// endStream ends a stream whose headers are sent: a read that failed
// because the client left is no error; anything else is logged and the
// connection closed, so the client reconnects with Last-Event-ID.
func (s *Server) endStream(ctx context.Context, err error) error {
	if ctx.Err() != nil || errors.Is(err, failure.ErrNotFound) {
		return nil
	}
	s.log.Error("event stream read failed", "err", err)
	return nil
}

// eventJSON is one stored event as the API shows it.
func eventJSON(ev store.Event) eventBody {
	return eventBody{
		Seq: ev.Seq, Type: ev.Type, SchemaVersion: ev.SchemaVersion, At: ev.At,
		NodeID: ev.NodeID, Attempt: ev.Attempt, Data: orEmptyObject(ev.Data),
		PrevHash: ev.PrevHash, Hash: ev.Hash,
	}
}
