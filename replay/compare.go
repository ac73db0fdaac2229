package replay

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
	"strconv"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// Verdicts of a replayed run (GET /v1/replays/{id}).
const (
	VerdictSame          = "same"
	VerdictOutputChanged = "output-changed"
	VerdictPathChanged   = "path-changed"
	VerdictNowFails      = "now-fails"
	VerdictNowSucceeds   = "now-succeeds"
	VerdictNotReplayable = "not-replayable"
)

// Outcome is what one run did, as the comparison sees it: the recorded
// live run or its simulation.
type Outcome struct {
	Status string
	// Output is the run output (succeeded runs); Error the run error as
	// compared (its code and node, see comparableError).
	Output json.RawMessage
	Error  json.RawMessage
	// Nodes are the nodes that have an outcome (at least one event).
	Nodes map[string]NodeOutcome
}

// NodeOutcome is how a node ended: its status and the port that fired.
type NodeOutcome struct {
	Status string
	Port   string
}

// Diff is the compact difference between a recorded run and its simulation.
type Diff struct {
	// Output lists the run output's differences as JSON pointer operations
	// (the run error's, under /error, when either run failed).
	Output []Op `json:"output,omitempty"`
	// Nodes lists the nodes that ran or were skipped differently.
	Nodes []NodeChange `json:"nodes,omitempty"`
	// Unrecorded lists the nodes the simulation ran with no recording
	// behind them: a fixture of the request or the simulation default.
	Unrecorded []string `json:"unrecorded,omitempty"`
	// Truncated says Output was cut at MaxDiffOps.
	Truncated bool `json:"truncated,omitempty"`
}

// Empty reports whether d carries nothing.
func (d Diff) Empty() bool {
	return len(d.Output) == 0 && len(d.Nodes) == 0 && len(d.Unrecorded) == 0 && !d.Truncated
}

// Op is one JSON difference: replace, add or remove at Path (a JSON pointer).
type Op struct {
	Op   string `json:"op"`
	Path string `json:"path"`
	From any    `json:"from,omitempty"`
	To   any    `json:"to,omitempty"`
}

// NodeChange is a node whose outcome changed: status, with the port that
// fired when only that differs ("succeeded:yes").
type NodeChange struct {
	NodeID    string `json:"nodeId"`
	Recorded  string `json:"recorded"`
	Simulated string `json:"simulated"`
}

// Bounds of a diff, so a report stays compact whatever the outputs are.
const (
	// MaxDiffOps bounds the output operations of one run.
	MaxDiffOps = 50
	// MaxDiffValueBytes bounds a value shown in an operation; a larger one
	// is shown as {"bytes": n} (GET /v1/runs/{id} has it whole).
	MaxDiffValueBytes = 1 << 10
)

// Compare decides the verdict of a replayed run (the contract's rules, in
// order): recorded succeeded and simulated failed is now-fails; recorded
// failed and simulated succeeded is now-succeeds; nodes that ran or were
// skipped differently make it path-changed; a differing output or error
// output-changed; else same. added are the draft's nodes that the recorded
// revision does not have: their outcome has nothing to differ from, so
// they do not count as path changes (the unrecorded note reports them).
func Compare(recorded, simulated Outcome, added map[string]bool) (string, Diff) {
	var d Diff
	for _, id := range slices.Sorted(maps.Keys(union(recorded.Nodes, simulated.Nodes))) {
		if added[id] {
			continue
		}
		r, s := recorded.Nodes[id], simulated.Nodes[id]
		switch {
		case r.Status != s.Status:
			d.Nodes = append(d.Nodes, NodeChange{NodeID: id, Recorded: orNone(r.Status), Simulated: orNone(s.Status)})
		case r.Port != s.Port:
			d.Nodes = append(d.Nodes, NodeChange{NodeID: id, Recorded: r.Status + ":" + r.Port, Simulated: s.Status + ":" + s.Port})
		}
	}
	d.Output, d.Truncated = diffJSON(recorded.Output, simulated.Output)
	if len(recorded.Error) > 0 || len(simulated.Error) > 0 {
		ops, cut := diffJSON(recorded.Error, simulated.Error)
		for i := range ops {
			ops[i].Path = "/error" + ops[i].Path
		}
		d.Output = append(d.Output, ops...)
		d.Truncated = d.Truncated || cut
		if len(d.Output) > MaxDiffOps {
			d.Output, d.Truncated = d.Output[:MaxDiffOps], true
		}
	}
	switch {
	case recorded.Status == execution.StatusSucceeded && simulated.Status == execution.StatusFailed:
		return VerdictNowFails, d
	case recorded.Status == execution.StatusFailed && simulated.Status == execution.StatusSucceeded:
		return VerdictNowSucceeds, d
	case len(d.Nodes) > 0:
		return VerdictPathChanged, d
	case len(d.Output) > 0 || recorded.Status != simulated.Status:
		return VerdictOutputChanged, d
	}
	return VerdictSame, d
}

// AddedNodes are the nodes of draft that recorded (the revision the run
// ran) does not have.
func AddedNodes(recorded, draft *graph.Document) map[string]bool {
	had := map[string]bool{}
	if recorded != nil {
		for _, n := range recorded.Nodes {
			had[n.ID] = true
		}
	}
	added := map[string]bool{}
	for _, n := range draft.Nodes {
		if !had[n.ID] {
			added[n.ID] = true
		}
	}
	return added
}

// UsedUnrecorded is the sorted subset of unrecorded (simulated nodes with
// no recording) that the simulation actually ran: a branch not taken
// needed no recording, so it is not worth a note.
func UsedUnrecorded(unrecorded []string, simulated Outcome) []string {
	var out []string
	for _, id := range unrecorded {
		if n, ok := simulated.Nodes[id]; ok && ran(n.Status) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// ran reports whether a node status means the node was executed (not
// skipped, not left pending).
func ran(status string) bool {
	switch status {
	case "", execution.NodePending, execution.NodeSkipped:
		return false
	}
	return true
}

// union is a map holding the keys of both (b's values where both have one).
func union[V any](a, b map[string]V) map[string]V {
	u := make(map[string]V, len(a)+len(b))
	maps.Copy(u, a)
	maps.Copy(u, b)
	return u
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// diffJSON lists the differences from a to b (either may be absent: nil)
// as operations, at most MaxDiffOps (true when cut).
func diffJSON(a, b json.RawMessage) ([]Op, bool) {
	av, aok := decode(a)
	bv, bok := decode(b)
	w := &differ{}
	switch {
	case !aok && !bok:
	case !aok:
		w.add(Op{Op: "add", Path: "", To: shown(bv)})
	case !bok:
		w.add(Op{Op: "remove", Path: "", From: shown(av)})
	default:
		w.diff("", av, bv)
	}
	return w.ops, w.cut
}

type differ struct {
	ops []Op
	cut bool
}

func (w *differ) add(op Op) {
	if len(w.ops) == MaxDiffOps {
		w.cut = true
		return
	}
	w.ops = append(w.ops, op)
}

func (w *differ) diff(path string, a, b any) {
	if w.cut {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		for _, k := range slices.Sorted(maps.Keys(union(av, bv))) {
			p := path + "/" + graph.EscapePointerToken(k)
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case !inA:
				w.add(Op{Op: "add", Path: p, To: shown(y)})
			case !inB:
				w.add(Op{Op: "remove", Path: p, From: shown(x)})
			default:
				w.diff(p, x, y)
			}
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		for i := 0; i < max(len(av), len(bv)); i++ {
			p := path + "/" + strconv.Itoa(i)
			switch {
			case i >= len(av):
				w.add(Op{Op: "add", Path: p, To: shown(bv[i])})
			case i >= len(bv):
				w.add(Op{Op: "remove", Path: p, From: shown(av[i])})
			default:
				w.diff(p, av[i], bv[i])
			}
		}
		return
	}
	if !equal(a, b) {
		w.add(Op{Op: "replace", Path: path, From: shown(a), To: shown(b)})
	}
}

// decode reads a JSON value, numbers kept exact; absent (nil, empty) is
// not ok. Malformed JSON compares as its text.
func decode(raw json.RawMessage) (any, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return nil, false
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return string(raw), true
	}
	return v, true
}

// equal compares two scalars (or a scalar with a container of the other
// side): numbers by their value, so 1 and 1.0 are the same.
func equal(a, b any) bool {
	an, aNum := a.(json.Number)
	bn, bNum := b.(json.Number)
	if aNum && bNum {
		if an == bn {
			return true
		}
		af, err1 := an.Float64()
		bf, err2 := bn.Float64()
		return err1 == nil && err2 == nil && af == bf
	}
	switch a.(type) {
	case map[string]any, []any:
		return false
	}
	switch b.(type) {
	case map[string]any, []any:
		return false
	}
	return a == b
}

// shown is a value as an operation shows it: itself, or {"bytes": n} when
// its JSON is larger than MaxDiffValueBytes.
func shown(v any) any {
	b, err := json.Marshal(v)
	if err != nil || len(b) <= MaxDiffValueBytes {
		return v
	}
	return map[string]any{"bytes": len(b)}
}
