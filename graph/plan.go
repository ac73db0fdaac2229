package graph

// Compiled is a validated, normalized revision: what publication stores and
// what the checksum covers (together with the pinned dependency contracts).
type Compiled struct {
	// Document is the normalized document: nodes in compiled order, edges
	// sorted by (from, to), content otherwise as authored (retry and timeout
	// defaults are filled in the Plan only).
	Document Document `json:"document"`
	// Order is the deterministic compile order (topological, ties by node id).
	Order []string `json:"order"`
	// Actions and Agents are the pinned dependency contracts with their hashes.
	Actions []PinnedAction  `json:"actions"`
	Agents  []AgentContract `json:"agents"`
	// Permissions is the sorted union of every node's required permissions.
	Permissions []string `json:"permissions"`
	// NodePermissions maps the id of every agent, agent-decision and action
	// node (and any node whose templates need scopes) to the sorted
	// permissions it needs; a node absent from the map needs none.
	NodePermissions map[string][]string `json:"nodePermissions"`
	// EstimatedHistoryEvents is the worst-case Temporal history size (nodes x
	// attempts); see EstimateHistoryEvents for the formula.
	EstimatedHistoryEvents int `json:"estimatedHistoryEvents"`
	// Checksum is hex sha256 of the canonical JSON (RFC 8785) of the revision
	// (Document, Actions, Agents). It does not cover itself or Order.
	Checksum string `json:"checksum"`
}

// PinnedAction is an action contract pinned into a revision with its content hash.
type PinnedAction struct {
	ActionContract
	Hash string `json:"hash"`
}

// Plan is the execution plan the interpreter loads: ids, kinds, wiring,
// retries and timeouts, nothing else. Node bodies (expressions, mappings,
// schemas) are fetched by activities by (checksum, node id).
type Plan struct {
	Checksum string     `json:"checksum"`
	Nodes    []PlanNode `json:"nodes"` // compiled order
}

// PlanNode is one node of a Plan.
type PlanNode struct {
	ID   string `json:"id"`
	Kind Kind   `json:"kind"`
	// Index is the node's position in compiled order (ties between outputs settle by it).
	Index int `json:"index"`
	// Inputs lists the node's input ports sorted by name with their one source.
	Inputs []PlanInput `json:"inputs,omitempty"`
	// Outputs lists the node's output ports sorted by name with their targets.
	Outputs []PlanOutput `json:"outputs,omitempty"`
	// Retry is normalized: MaxAttempts >= 1 and intervals filled in.
	Retry     Retry `json:"retry"`
	TimeoutMs int   `json:"timeoutMs"`
	// Summary is the Temporal activity summary, "nodeId · kind".
	Summary string `json:"summary"`
	// ReadOnly marks an action node whose pinned action has risk read
	// (RiskRead): its attempts have no side effects, so the interpreter
	// (version 8) need not make its node.started durable before it runs.
	// False for every other node, and in plans published before the field.
	ReadOnly bool `json:"readOnly,omitempty"`
}

// PlanInput is an input port and the output port feeding it.
type PlanInput struct {
	Port     string `json:"port"`
	FromNode string `json:"fromNode"`
	FromPort string `json:"fromPort"`
}

// PlanOutput is an output port and the input ports it feeds, sorted.
type PlanOutput struct {
	Port string    `json:"port"`
	To   []PortRef `json:"to,omitempty"`
}

// PortRef names one port of one node.
type PortRef struct {
	Node string `json:"node"`
	Port string `json:"port"`
}

// NodeBody returns the authored node of a compiled revision, for activities.
func (c *Compiled) NodeBody(id string) (Node, bool) {
	for _, n := range c.Document.Nodes {
		if n.ID == id {
			return n, true
		}
	}
	return Node{}, false
}
