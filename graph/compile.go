package graph

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
)

// Compile validates doc against cat and, when there is no issue, returns the
// compiled revision (and an empty, non-nil issue list). On issues it returns
// nil and every issue. The revision's Document shares maps and raw values
// with doc, so do not modify doc afterwards.
func Compile(doc *Document, cat Catalog) (*Compiled, []Issue) {
	return CompileWith(doc, cat, Options{})
}

// CompileWith is Compile with extension hooks (template checks and the scopes
// templates need).
func CompileWith(doc *Document, cat Catalog, opts Options) (*Compiled, []Issue) {
	a := analyze(doc, cat, opts)
	if len(a.issues) > 0 {
		return nil, a.issues
	}
	c, err := a.compile()
	if err != nil {
		// Only reachable for content encoding/json cannot marshal, which a
		// decoded document never holds; still a stable issue, never a panic.
		return nil, []Issue{{Code: CodeInvalidDocument, Path: "", Message: err.Error()}}
	}
	return c, []Issue{}
}

// compile builds the revision from a clean analysis.
func (a *analysis) compile() (*Compiled, error) {
	doc := normalizedDocument(a.doc, a.order, a.index)

	actions := make([]PinnedAction, 0, len(a.actions))
	for _, ref := range slices.SortedFunc(maps.Keys(a.actions), compareActionRef) {
		c := a.actions[ref]
		c.RequiredPermissions = sortedDistinct(slices.Clone(c.RequiredPermissions))
		h, err := c.ContentHash()
		if err != nil {
			return nil, fmt.Errorf("action %s: %w", ref, err)
		}
		actions = append(actions, PinnedAction{ActionContract: c, Hash: h})
	}
	agents := make([]AgentContract, 0, len(a.agents))
	for _, ref := range slices.SortedFunc(maps.Keys(a.agents), compareAgentRef) {
		c := a.agents[ref]
		if c.Hash == "" {
			// The catalog should pin the revision's content hash; when it
			// does not, pin this contract's own hash so the checksum still
			// changes with it.
			h, err := hashOf(c)
			if err != nil {
				return nil, fmt.Errorf("agent %s: %w", ref, err)
			}
			c.Hash = h
		}
		agents = append(agents, c)
	}

	perms := []string{}
	nodePerms := make(map[string][]string, len(a.nodePerms))
	for id, p := range a.nodePerms {
		nodePerms[id] = p
		perms = append(perms, p...)
	}
	perms = sortedDistinct(perms)

	c := &Compiled{
		Document:               doc,
		Order:                  a.order,
		Actions:                actions,
		Agents:                 agents,
		Permissions:            perms,
		NodePermissions:        nodePerms,
		EstimatedHistoryEvents: EstimateHistoryEvents(doc),
	}
	sum, err := checksum(c)
	if err != nil {
		return nil, err
	}
	c.Checksum = sum
	return c, nil
}

// ContentHash is hex sha256 of the contract's canonical JSON: what a
// revision pins, and what the catalog compares to refuse a second, different
// contract under the same id@version. Permissions are a set, so normalize
// them (sorted, distinct, never null) before comparing hashes.
func (c ActionContract) ContentHash() (string, error) { return hashOf(c) }

// VerifyChecksum recomputes the checksum of a compiled revision (for example
// one loaded from storage) and reports a mismatch.
func (c *Compiled) VerifyChecksum() error {
	sum, err := checksum(c)
	if err != nil {
		return err
	}
	if sum != c.Checksum {
		return fmt.Errorf("compiled revision checksum mismatch: stored %s, computed %s", c.Checksum, sum)
	}
	return nil
}

// checksum is hex sha256 of the canonical JSON of {document, actions,
// agents}. Nodes are in compile order and edges sorted, and JCS sorts every
// object key, so the checksum depends on content only.
func checksum(c *Compiled) (string, error) {
	return hashOf(checksumContent{c.Document, c.Actions, c.Agents})
}

// checksumContent is what a revision checksum covers.
type checksumContent struct {
	Document Document        `json:"document"`
	Actions  []PinnedAction  `json:"actions"`
	Agents   []AgentContract `json:"agents"`
}

// normalizedDocument returns doc with nodes in compile order and edges sorted
// by (from, to). Content is otherwise as authored (no defaults filled), so
// what the author wrote is what the checksum covers.
func normalizedDocument(doc *Document, order []string, index map[string]int) Document {
	out := *doc
	if len(order) == len(doc.Nodes) && doc.Nodes != nil {
		// A clean analysis: ids are distinct and order names every node
		// once, so the nodes are placed directly.
		out.Nodes = make([]Node, len(order))
		for i, id := range order {
			out.Nodes[i] = doc.Nodes[index[id]]
		}
	} else {
		pos := make(map[string]int, len(order))
		for i, id := range order {
			pos[id] = i
		}
		out.Nodes = slices.Clone(doc.Nodes)
		slices.SortStableFunc(out.Nodes, func(x, y Node) int { return cmp.Compare(pos[x.ID], pos[y.ID]) })
	}
	out.Edges = slices.Clone(doc.Edges)
	if out.Edges == nil {
		out.Edges = []Edge{}
	}
	if out.Nodes == nil {
		out.Nodes = []Node{}
	}
	slices.SortFunc(out.Edges, func(x, y Edge) int {
		if c := strings.Compare(x.From, y.From); c != 0 {
			return c
		}
		return strings.Compare(x.To, y.To)
	})
	return out
}

// History event estimate (SPEC §5: publication estimates worst-case history
// events). Costs measured on the dev server: an empty workflow is 5 events;
// an activity is 3 events (scheduled, started, closed) plus the 3 of the
// workflow task its completion causes; a local activity is 1 marker; a
// retry delay is a timer (started, fired) plus the workflow task it wakes;
// each workflow task also records one events-flush local activity marker.
const (
	historyWorkflowOverhead   = 5 + 1 // start/first task/close + LoadPlan marker
	historyActivityAttempt    = 3 + 3 + 1
	historyLocalAttempt       = 1 + 3 + 1
	historyRetryDelay         = 2 + 3 + 1
	historyInlineNode         = 1 // input/output: settled in the workflow, one flush marker
	historyCancellationBuffer = 10
	// historyApprovalWait is one wait for a decision, worst case: the
	// requested event's flush marker, the timer (started, then fired or
	// cancelled), the workflow task the decision's update arrives in (3)
	// with its accepted and completed events (2), the marker of the local
	// activity that loads a decision weft stored, an operator's identity
	// lookup (an activity, 3, and the workflow task it wakes, 3), the
	// decision's flush marker and the workflow task that routes on (3).
	historyApprovalWait = 1 + 2 + 3 + 2 + 1 + 3 + 3 + 1 + 3
)

// EstimateHistoryEvents returns a worst-case Temporal history size for one
// run of doc, assuming every node runs every attempt in its own workflow task:
//
//	6 + 10 + Σ_nodes [ A·perAttempt(kind) + (A−1)·6 + approvals(node) ]
//
// where A is the node's normalized maxAttempts, perAttempt is 7 for agent,
// agent-decision and action nodes (activity + workflow task + flush marker),
// 5 for gate, validator and merge (local activity marker + workflow task +
// flush marker), and input/output nodes count 1. An approval node counts
// one wait for a decision (21: historyApprovalWait). An agent node whose
// toolset requires approval for a tool may wait before each of its tool
// calls (at most MaxToolCallsPerNode) and resume with an attempt each time:
// approvals(node) = 200 × (21 + 7). The 10 covers cancellation and the
// final flush. Publication compares it with Temporal's 51,200-event limit;
// continue-as-new keeps real runs below it regardless.
func EstimateHistoryEvents(doc Document) int {
	total := historyWorkflowOverhead + historyCancellationBuffer
	for _, n := range doc.Nodes {
		attempts := NormalizeRetry(n.Retry).MaxAttempts
		switch {
		case n.Kind == KindApproval:
			total += historyApprovalWait
		case isLocal(n.Kind):
			total += attempts*historyLocalAttempt + (attempts-1)*historyRetryDelay
		case runsActivity(n.Kind):
			total += attempts*historyActivityAttempt + (attempts-1)*historyRetryDelay
			if asksApprovals(&doc, n) {
				total += MaxToolCallsPerNode * (historyApprovalWait + historyActivityAttempt)
			}
		default:
			total += historyInlineNode
		}
	}
	return total
}

// asksApprovals reports whether an agent node's effective toolset requires
// approval for any tool.
func asksApprovals(doc *Document, n Node) bool {
	_, ts, ok := EffectiveToolset(doc, n)
	if !ok {
		return false
	}
	for _, p := range ts.Approval {
		if p == ApprovalRequired {
			return true
		}
	}
	return false
}

// Plan builds the execution plan the interpreter loads: wiring in compile
// order, normalized retries and timeouts, which action nodes only read
// (their pinned action's risk), and no node bodies.
func (c *Compiled) Plan() Plan {
	inputs := map[string][]PlanInput{}
	outputs := map[string]map[string][]PortRef{}
	for _, e := range c.Document.Edges {
		fn, fp, _ := SplitEndpoint(e.From)
		tn, tp, _ := SplitEndpoint(e.To)
		inputs[tn] = append(inputs[tn], PlanInput{Port: tp, FromNode: fn, FromPort: fp})
		if outputs[fn] == nil {
			outputs[fn] = map[string][]PortRef{}
		}
		outputs[fn][fp] = append(outputs[fn][fp], PortRef{Node: tn, Port: tp})
	}
	risks := make(map[ActionRef]Risk, len(c.Actions))
	for _, a := range c.Actions {
		risks[ActionRef{ID: a.ID, Version: a.Version}] = a.Risk
	}
	p := Plan{Checksum: c.Checksum, Nodes: make([]PlanNode, 0, len(c.Document.Nodes))}
	for i, n := range c.Document.Nodes {
		pn := PlanNode{
			ID:        n.ID,
			Kind:      n.Kind,
			Index:     i,
			Inputs:    inputs[n.ID],
			Retry:     NormalizeRetry(n.Retry),
			TimeoutMs: n.TimeoutMs,
			Summary:   n.ID + " · " + string(n.Kind),
		}
		if pn.TimeoutMs == 0 {
			pn.TimeoutMs = DefaultTimeoutMs(n.Kind)
		}
		if n.Kind == KindAction && n.Action != nil {
			pn.ReadOnly = risks[*n.Action] == RiskRead
		}
		slices.SortFunc(pn.Inputs, func(x, y PlanInput) int { return strings.Compare(x.Port, y.Port) })
		for _, port := range slices.Sorted(maps.Keys(n.Outputs)) {
			to := outputs[n.ID][port]
			slices.SortFunc(to, func(x, y PortRef) int {
				return cmp.Or(strings.Compare(x.Node, y.Node), strings.Compare(x.Port, y.Port))
			})
			pn.Outputs = append(pn.Outputs, PlanOutput{Port: port, To: to})
		}
		p.Nodes = append(p.Nodes, pn)
	}
	return p
}
