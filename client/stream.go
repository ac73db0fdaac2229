package client

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// Stream reconnection: the server suggests a delay (retry:); repeated
// failures back off up to streamMaxDelay, and streamMaxFailures in a row
// without a connection give up.
const (
	streamDefaultDelay = 2 * time.Second
	streamMaxDelay     = 15 * time.Second
	streamMaxFailures  = 8
)

// StreamEnd is the last message of a run's event stream.
type StreamEnd struct {
	Status  string `json:"status"`
	LastSeq int64  `json:"lastSeq"`
}

// errStreamDropped is a connection that ended without the end message.
var errStreamDropped = errors.New("the event stream closed before the run ended")

// StreamEvents follows run id's events after seq `after` through
// GET /v1/runs/{id}/events/stream, calling fn with each event in seq order,
// until the run's terminal event has been delivered; it returns the
// stream's end message. A dropped connection is resumed with Last-Event-ID,
// and fn sees every event exactly once. A refusal (*Error: 401, 403, 404,
// 429), an error from fn or the end of ctx stops it.
func (c *Client) StreamEvents(ctx context.Context, id string, after int64, fn func(Event) error) (StreamEnd, error) {
	// The whole-request timeout of c.http would cut a long stream.
	h := *c.http
	h.Timeout = 0
	last := after
	delay := streamDefaultDelay
	failures := 0
	for {
		end, connected, err := c.streamOnce(ctx, &h, id, &last, &delay, fn)
		if err == nil {
			return end, nil
		}
		var apiErr *Error
		if ctx.Err() != nil || (errors.As(err, &apiErr) && apiErr.Status != http.StatusServiceUnavailable) || errors.Is(err, errCallback) {
			return StreamEnd{}, unwrapCallback(err)
		}
		if connected {
			failures = 0
		}
		failures++
		if failures >= streamMaxFailures {
			return StreamEnd{}, fmt.Errorf("events of run %s: giving up after %d attempts: %w", id, failures, err)
		}
		wait := min(delay*time.Duration(failures), streamMaxDelay)
		select {
		case <-ctx.Done():
			return StreamEnd{}, ctx.Err()
		case <-time.After(wait):
		}
	}
}

// errCallback marks an error returned by the caller's fn.
var errCallback = errors.New("callback")

type callbackError struct{ err error }

func (e callbackError) Error() string        { return e.err.Error() }
func (e callbackError) Is(target error) bool { return target == errCallback }
func (e callbackError) Unwrap() error        { return e.err }

func unwrapCallback(err error) error {
	var cb callbackError
	if errors.As(err, &cb) {
		return cb.err
	}
	return err
}

// streamOnce reads one connection of the stream. connected reports whether
// the server accepted it.
func (c *Client) streamOnce(ctx context.Context, h *http.Client, id string, last *int64, delay *time.Duration, fn func(Event) error) (end StreamEnd, connected bool, err error) {
	u := *c.base
	u.RawPath = c.base.EscapedPath() + runPath(id, "events", "stream")
	if u.Path, err = url.PathUnescape(u.RawPath); err != nil {
		return end, false, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return end, false, err
	}
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("Last-Event-ID", strconv.FormatInt(*last, 10))
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	if c.UserAgent != "" {
		req.Header.Set("User-Agent", c.UserAgent)
	}
	res, err := h.Do(req)
	if err != nil {
		return end, false, fmt.Errorf("GET %s: %w", u.Redacted(), err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(res.Body, 64<<10))
		return end, false, decodeError(res.StatusCode, data)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 4<<20)
	var event, data string
	var hasData bool
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			if hasData {
				switch event {
				case "end":
					if err := json.Unmarshal([]byte(data), &end); err != nil {
						return end, true, fmt.Errorf("events of run %s: bad end message: %w", id, err)
					}
					return end, true, nil
				case "", "message":
					var ev Event
					if err := json.Unmarshal([]byte(data), &ev); err != nil {
						return end, true, fmt.Errorf("events of run %s: bad event: %w", id, err)
					}
					if ev.Seq > *last {
						if err := fn(ev); err != nil {
							return end, true, callbackError{err}
						}
						*last = ev.Seq
					}
				}
			}
			event, data, hasData = "", "", false
			continue
		}
		if strings.HasPrefix(line, ":") {
			continue
		}
		field, value, _ := strings.Cut(line, ":")
		value = strings.TrimPrefix(value, " ")
		switch field {
		case "event":
			event = value
		case "data":
			if hasData {
				data += "\n"
			}
			data += value
			hasData = true
		case "retry":
			if ms, err := strconv.Atoi(value); err == nil && ms > 0 {
				*delay = time.Duration(ms) * time.Millisecond
			}
		}
	}
	if err := sc.Err(); err != nil {
		return end, true, fmt.Errorf("events of run %s: %w", id, err)
	}
	return end, true, errStreamDropped
}
