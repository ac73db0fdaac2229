package graph

// Limits are the hard bounds of a schemaVersion 1 document. They live in one
// value so validation, the API (dry-run returns them) and the interpreter agree
// on them; they are not configurable, because a revision that validated once
// must validate everywhere.
type Limits struct {
	MaxNodes int `json:"maxNodes"`
	MaxEdges int `json:"maxEdges"`
	// MaxFanIn bounds the incoming edges (and so the input ports) of one node;
	// a merge's ports count.
	MaxFanIn           int `json:"maxFanIn"`
	MaxMappingEntries  int `json:"maxMappingEntries"`
	MaxSchemas         int `json:"maxSchemas"`
	MaxDocumentBytes   int `json:"maxDocumentBytes"`
	MaxExpressionChars int `json:"maxExpressionChars"`
	MaxTemplateChars   int `json:"maxTemplateChars"`
	// MaxToolsetSummaryChars bounds a toolset's one-line summary.
	MaxToolsetSummaryChars int `json:"maxToolsetSummaryChars"`
	MaxAttempts            int `json:"maxAttempts"`
	MinTimeoutMs           int `json:"minTimeoutMs"`
	MaxTimeoutMs           int `json:"maxTimeoutMs"`
	// MinApprovalTimeoutMs and MaxApprovalTimeoutMs bound an approval
	// node's timeoutMs and a toolset's approvalTimeoutMs: a wait for a
	// person, not an attempt, so MaxTimeoutMs does not apply.
	MinApprovalTimeoutMs int `json:"minApprovalTimeoutMs"`
	MaxApprovalTimeoutMs int `json:"maxApprovalTimeoutMs"`
	// MaxRetryIntervalMs bounds initialIntervalMs and maxIntervalMs so a retry
	// delay can never park a run for days.
	MaxRetryIntervalMs int `json:"maxRetryIntervalMs"`
	// MaxBackoff bounds the backoff coefficient.
	MaxBackoff float64 `json:"maxBackoff"`
	// ExpressionCostLimit is the CEL runtime cost budget of one gate
	// evaluation (cel.CostLimit); exceeding it fails the evaluation. Gates
	// are predicates, not programs: 10,000 allows a few thousand
	// comprehension steps. It is kept small also because cel-go's runtime
	// cost tracking makes a long comprehension quadratic in its length.
	ExpressionCostLimit uint64 `json:"expressionCostLimit"`
}

// DefaultLimits is the one set of limits weft enforces (SPEC §2).
var DefaultLimits = Limits{
	MaxNodes:               200,
	MaxEdges:               400,
	MaxFanIn:               32,
	MaxMappingEntries:      64,
	MaxSchemas:             64,
	MaxDocumentBytes:       1 << 20,
	MaxExpressionChars:     2000,
	MaxTemplateChars:       8000,
	MaxToolsetSummaryChars: 600,
	MaxAttempts:            10,
	MinTimeoutMs:           250,
	MaxTimeoutMs:           600_000,
	MinApprovalTimeoutMs:   1_000,
	MaxApprovalTimeoutMs:   30 * 24 * 3_600_000,
	MaxRetryIntervalMs:     3_600_000,
	MaxBackoff:             10,
	ExpressionCostLimit:    10_000,
}

// Retry defaults, applied in the execution plan only: the compiled document
// keeps what the author wrote so the checksum covers authored content.
const (
	DefaultMaxAttempts       = 1
	DefaultInitialIntervalMs = 1000
	DefaultBackoff           = 2.0
	DefaultMaxIntervalMs     = 60_000
)

// DefaultToolApprovalTimeoutMs is how long an agent's call of a tool whose
// toolset requires approval waits when the toolset sets no
// approvalTimeoutMs: a day.
const DefaultToolApprovalTimeoutMs = 24 * 3_600_000

// MaxToolCallsPerNode bounds the tool calls of one agent node over all its
// attempts (the agent harness denies calls beyond it), and so the approval
// requests it can make: the history estimate counts on it.
const MaxToolCallsPerNode = 200

// Timeout defaults per kind, applied in the execution plan only.
const (
	// DefaultActionTimeoutMs applies to action nodes.
	DefaultActionTimeoutMs = 30_000
	// DefaultAgentTimeoutMs applies to agent and agent-decision nodes, which
	// may take several model turns.
	DefaultAgentTimeoutMs = 120_000
	// DefaultLocalTimeoutMs applies to gate, validator and merge nodes, which
	// run as local activities and must stay short.
	DefaultLocalTimeoutMs = 5_000
)

// DefaultTimeoutMs returns the timeout a node of kind k gets when it sets
// none. Input and output nodes run no activity and get 0.
func DefaultTimeoutMs(k Kind) int {
	switch k {
	case KindAction:
		return DefaultActionTimeoutMs
	case KindAgent, KindAgentDecision:
		return DefaultAgentTimeoutMs
	case KindGate, KindValidator, KindMerge:
		return DefaultLocalTimeoutMs
	}
	return 0
}

// runsActivity reports whether a node of kind k executes as a (local)
// activity, and so may carry retry and timeout settings.
func runsActivity(k Kind) bool { return DefaultTimeoutMs(k) > 0 }

// isLocal reports whether a node of kind k runs as a local activity.
func isLocal(k Kind) bool { return k == KindGate || k == KindValidator || k == KindMerge }

// NormalizeRetry fills the defaults of an authored retry policy (nil means
// none). The interpreter computes delays from the result, so every field is
// set: MaxAttempts >= 1, intervals > 0, Backoff >= 1, MaxIntervalMs >=
// InitialIntervalMs.
func NormalizeRetry(r *Retry) Retry {
	var out Retry
	if r != nil {
		out = *r
	}
	if out.MaxAttempts <= 0 {
		out.MaxAttempts = DefaultMaxAttempts
	}
	if out.InitialIntervalMs <= 0 {
		out.InitialIntervalMs = DefaultInitialIntervalMs
	}
	if out.Backoff < 1 {
		out.Backoff = DefaultBackoff
	}
	if out.MaxIntervalMs <= 0 {
		out.MaxIntervalMs = max(DefaultMaxIntervalMs, out.InitialIntervalMs)
	}
	return out
}

// RetryDelayMs returns the delay before attempt+1 after attempt failed
// (attempt counts from 1): initial × backoff^(attempt-1), capped at
// MaxIntervalMs. No jitter, so the delay is deterministic and recordable.
func (r Retry) RetryDelayMs(attempt int) int {
	n := NormalizeRetry(&r)
	d := float64(n.InitialIntervalMs)
	for i := 1; i < attempt && d < float64(n.MaxIntervalMs); i++ {
		d *= n.Backoff
	}
	if d > float64(n.MaxIntervalMs) {
		return n.MaxIntervalMs
	}
	return int(d)
}
