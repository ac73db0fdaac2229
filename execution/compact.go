package execution

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/weftworks/weft/failure"
)

// CodeCarriedInvalid is the stable code of a carried batch that cannot be
// decoded (CompactBatch.Expand, NodeInput.CarriedEvents): a key that does
// not name its event, an offset out of range, both forms at once. The
// interpreter never writes one, so it is a programming error or a forged
// input; the attempt fails permanently (ErrAppendRefused) rather than
// append events it cannot vouch for.
const CodeCarriedInvalid = "CARRIED_INVALID"

// CompactBatch is an EventBatch in the wire form of interpreter version 6
// (NodeInput.Carried): the same events with nothing repeated that the
// attempt can derive. In a chain10 run the carried events were 17.8 KB of
// the 24.6 KB of attempt inputs, and every carried byte costs about 7
// bytes allocated in a worker's process (docs/benchmarks.md, session 9).
//
//   - Each event's key is relative to the run (CompactEvent.Key): the
//     activity has the run id already (NodeInput.RunID) and prefixes it.
//   - type, nodeId and attempt are not sent: the key names them
//     (run/node/attempt/type[/discriminator], "-" for a run-level event's
//     node), so Expand reads them back from it.
//   - at is an offset in microseconds from Base, the batch's earliest
//     event time. Workflow time has nanoseconds, but the store keeps and
//     hashes an event's time in UTC truncated to microseconds (what
//     PostgreSQL stores), so the expanded time is the one the log would
//     have held for the plain form: the same rows, the same hash chain.
//
// CompactBatchOf builds one only where that round trip is exact; anything
// else travels in the plain form (NodeInput.Events).
type CompactBatch struct {
	// Base is the earliest event's time, UTC, in microseconds; zero (and
	// left out) when the batch holds no event.
	Base    time.Time      `json:"base,omitzero"`
	Events  []CompactEvent `json:"events,omitempty"`
	Run     *RunUpdate     `json:"run,omitempty"`
	Through int            `json:"through"`
	// After is EventBatch.After: set only in NodeInput.Suffix.
	After int `json:"after,omitempty"`
}

// CompactEvent is one carried event of a CompactBatch. The member names
// are one letter: they repeat in every event of every input.
type CompactEvent struct {
	// Key is the event key after "<runId>/".
	Key string `json:"k"`
	// AtMicros is the event's time in microseconds after the batch's Base.
	AtMicros int64           `json:"t,omitempty"`
	Data     json.RawMessage `json:"d,omitempty"`
}

// maxCompactOffset is the largest offset a time.Duration can add.
const maxCompactOffset = math.MaxInt64 / int64(time.Microsecond)

// CompactBatchOf is the compact form of a run's carried events, and false
// when one of them would not come back exactly as the store would keep it
// (a key outside the run or not naming the event's node, attempt and
// type, a time the offset cannot hold): the caller then sends the plain
// form. It runs in workflow code, so it is deterministic and reads no
// clock.
func CompactBatchOf(runID string, events []EventDraft, run *RunUpdate, through int) (*CompactBatch, bool) {
	c := &CompactBatch{Run: run, Through: through}
	if len(events) == 0 {
		return c, true
	}
	for k, e := range events {
		if t := storedTime(e.At); k == 0 || t.Before(c.Base) {
			c.Base = t
		}
	}
	c.Events = make([]CompactEvent, len(events))
	for k, e := range events {
		rel, ok := strings.CutPrefix(e.Key, runID)
		if !ok || len(rel) < 2 || rel[0] != '/' {
			return nil, false
		}
		rel = rel[1:]
		typ, nodeID, attempt, err := keyNames(rel)
		if err != nil || typ != e.Type || nodeID != e.NodeID || attempt != e.Attempt {
			return nil, false
		}
		off := storedTime(e.At).Sub(c.Base)
		if e.At.IsZero() || off < 0 || off == math.MaxInt64 { // a saturated Sub
			return nil, false
		}
		c.Events[k] = CompactEvent{Key: rel, AtMicros: int64(off / time.Microsecond), Data: e.Data}
	}
	return c, true
}

// storedTime is t as the store keeps it: UTC, truncated to microseconds.
func storedTime(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// Expand is the batch in the plain form, its keys under runID: what
// CompactBatchOf was given, each time as the store keeps it. A batch that
// could not have come from CompactBatchOf is refused (CodeCarriedInvalid).
func (c *CompactBatch) Expand(runID string) (*EventBatch, error) {
	b := &EventBatch{Run: c.Run, Through: c.Through, After: c.After}
	if len(c.Events) == 0 {
		return b, nil
	}
	if c.Base.IsZero() {
		return nil, failure.New(CodeCarriedInvalid, "a carried batch of %d events has no base time", len(c.Events))
	}
	if runID == "" {
		return nil, failure.New(CodeCarriedInvalid, "carried events need the input's run id")
	}
	base := c.Base.UTC()
	if !base.Equal(storedTime(base)) {
		// CompactBatchOf writes the stored time; a finer base would expand
		// to times the store cannot keep, so compacting them again differs.
		return nil, failure.New(CodeCarriedInvalid, "a carried batch's base time %s is finer than a microsecond", base.Format(time.RFC3339Nano))
	}
	// Every full key in one string (one allocation); each event's key,
	// type and node are substrings of it.
	var sb strings.Builder
	n := 0
	for _, e := range c.Events {
		n += len(runID) + 1 + len(e.Key)
	}
	sb.Grow(n)
	for _, e := range c.Events {
		sb.WriteString(runID)
		sb.WriteByte('/')
		sb.WriteString(e.Key)
	}
	keys := sb.String()
	b.Events = make([]EventDraft, len(c.Events))
	for k, e := range c.Events {
		key := keys[:len(runID)+1+len(e.Key)]
		keys = keys[len(key):]
		typ, nodeID, attempt, err := keyNames(key[len(runID)+1:])
		if err != nil {
			return nil, failure.Wrap(err, CodeCarriedInvalid, "carried event %d: %v", k, err)
		}
		if e.AtMicros < 0 || e.AtMicros > maxCompactOffset {
			return nil, failure.New(CodeCarriedInvalid, "carried event %d (%q): offset %d µs is out of range", k, e.Key, e.AtMicros)
		}
		b.Events[k] = EventDraft{Key: key, Type: typ, NodeID: nodeID, Attempt: attempt,
			At: base.Add(time.Duration(e.AtMicros) * time.Microsecond), Data: e.Data}
	}
	return b, nil
}

// keyNames reads the type, node and attempt an event key names after its
// run id: node/attempt/type[/discriminator], node "-" for a run-level
// event (no node). The attempt is a canonical decimal, as the interpreter
// writes it, so the key and the fields cannot disagree.
func keyNames(rel string) (typ, nodeID string, attempt int, err error) {
	node, rest, ok1 := strings.Cut(rel, "/")
	num, rest, ok2 := strings.Cut(rest, "/")
	typ, _, _ = strings.Cut(rest, "/")
	switch {
	case !ok1 || !ok2 || node == "" || typ == "":
		return "", "", 0, failure.New(CodeCarriedInvalid, "key %q is not node/attempt/type[/discriminator]", rel)
	case !canonicalAttempt(num):
		return "", "", 0, failure.New(CodeCarriedInvalid, "key %q: attempt %q is not a decimal attempt number", rel, num)
	}
	attempt, _ = strconv.Atoi(num) // canonicalAttempt: at most 9 digits
	if node == "-" {
		node = ""
	}
	return typ, node, attempt, nil
}

// canonicalAttempt: digits without a leading zero (0 itself allowed), at
// most 9 of them.
func canonicalAttempt(s string) bool {
	if s == "" || len(s) > 9 || (s[0] == '0' && len(s) > 1) {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// UnmarshalJSON decodes a batch as encoding/json does, into an Events
// slice allocated once (see EventBatch.UnmarshalJSON; every event has one
// "k" member).
func (c *CompactBatch) UnmarshalJSON(data []byte) error {
	type plain CompactBatch // the same fields without this method
	var p plain
	p.Events = presized[CompactEvent](data, compactKeyMember, minCompactEventJSONBytes)
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	if len(p.Events) == 0 {
		p.Events = nil // as an absent (omitempty) member decodes
	}
	*c = CompactBatch(p)
	return nil
}

var compactKeyMember = []byte(`"k"`)

// minCompactEventJSONBytes is less than any compact event takes encoded
// (`{"k":"a/0/x"}`).
const minCompactEventJSONBytes = 14

// CarriedEvents is the batch the attempt carries, in the plain form
// whichever form it came in (Events up to interpreter version 5, Carried
// from version 6, Suffix from version 7, with After set), or nil. An input
// holding more than one is refused, as is a suffix that names no ordinal
// it follows or one that cannot hold its events, or a prefix that names
// one: no release writes them.
func (in *NodeInput) CarriedEvents() (*EventBatch, error) {
	forms := 0
	for _, set := range []bool{in.Events != nil, in.Carried != nil, in.Suffix != nil} {
		if set {
			forms++
		}
	}
	switch {
	case forms > 1:
		return nil, failure.New(CodeCarriedInvalid, "the input carries events in more than one form")
	case in.Suffix != nil:
		s := in.Suffix
		if s.After <= 0 || len(s.Events) == 0 || s.Through != s.After+len(s.Events) {
			return nil, failure.New(CodeCarriedInvalid, "a carried suffix after ordinal %d through %d holds %d events", s.After, s.Through, len(s.Events))
		}
		return s.Expand(in.RunID)
	case in.Carried != nil:
		if in.Carried.After != 0 {
			return nil, failure.New(CodeCarriedInvalid, "a carried prefix names an ordinal it follows")
		}
		return in.Carried.Expand(in.RunID)
	case in.Events != nil && in.Events.After != 0:
		return nil, failure.New(CodeCarriedInvalid, "a carried prefix names an ordinal it follows")
	}
	return in.Events, nil
}
