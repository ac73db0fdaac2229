package execution

import "encoding/json"

// ActivityStoreValues (local) claim-checks port values the interpreter
// holds inline, so that continue-as-new carries node states and
// references only (SPEC §5).
const ActivityStoreValues = "weft.StoreValues"

// PortValue is one inline value of an output port, "node.port".
type PortValue struct {
	NodeID string          `json:"nodeId"`
	Port   string          `json:"port"`
	Value  json.RawMessage `json:"value"`
}

// StoreValuesInput is the input of the StoreValues local activity.
type StoreValuesInput struct {
	TenantID string      `json:"tenantId"`
	RunID    string      `json:"runId"`
	Values   []PortValue `json:"values"`
}

// StoreValuesResult holds one reference per stored value, in input order.
type StoreValuesResult struct {
	Refs []ValueRef `json:"refs"`
}
