// Package graph is weft's pure workflow contract: the schemaVersion 1 document,
// its validation (every issue at once, with stable codes and JSON-pointer
// paths), its deterministic compilation and its content checksum. It performs
// no I/O: dependencies (agent revisions, action contracts) are supplied by the
// caller through a Catalog.
package graph

import "encoding/json"

// SchemaVersion is the only document version this package understands.
const SchemaVersion = 1

// Kind is a node kind.
type Kind string

// The node kinds of schemaVersion 1. KindApproval was added later
// (issue 18); it is additive: documents without it are unchanged.
const (
	KindInput         Kind = "input"
	KindAgent         Kind = "agent"
	KindAgentDecision Kind = "agent-decision"
	KindGate          Kind = "gate"
	KindValidator     Kind = "validator"
	KindAction        Kind = "action"
	KindMerge         Kind = "merge"
	KindOutput        Kind = "output"
	// KindApproval waits durably, without an activity, for a person's
	// decision or its timeoutMs; its ports approved, rejected and timedOut
	// carry its one input unchanged.
	KindApproval Kind = "approval"
)

// Output ports of an approval node: exactly one fires.
const (
	PortApproved = "approved"
	PortRejected = "rejected"
	PortTimedOut = "timedOut"
)

// ApprovalRequired is the one approval policy a toolset gives a tool:
// the agent's call waits for a person's decision before anything about
// it runs.
const ApprovalRequired = "required"

// AnySchema is the port schema name that accepts every value.
const AnySchema = "any"

// LanguageCELv1 is the only gate language: CEL with the standard macros and a cost limit.
const LanguageCELv1 = "cel/v1"

// Document is a workflow graph as authored (JSON or YAML).
type Document struct {
	SchemaVersion int                        `json:"schemaVersion" required:"true"`
	Schemas       map[string]json.RawMessage `json:"schemas,omitempty"`
	Nodes         []Node                     `json:"nodes"`
	Edges         []Edge                     `json:"edges"`
	// Toolsets are captured toolset folders (section 9), keyed by name.
	Toolsets map[string]Toolset `json:"toolsets,omitempty"`
	// Tools names the default toolset for agent nodes.
	Tools string `json:"tools,omitempty"`
}

// Node is one vertex of the graph. Which fields apply depends on Kind.
type Node struct {
	ID      string            `json:"id"`
	Kind    Kind              `json:"kind"`
	Inputs  map[string]string `json:"inputs,omitempty"`
	Outputs map[string]string `json:"outputs,omitempty"`

	// Gate.
	Language   string `json:"language,omitempty"`
	Expression string `json:"expression,omitempty"`

	// Validator: the name of a schema in Document.Schemas (a JSON string) or
	// an inline JSON Schema object. Pinned into the revision either way.
	Schema json.RawMessage `json:"schema,omitempty"`

	// Agent and agent-decision.
	Agent *AgentRef `json:"agent,omitempty"`
	// Tools overrides the document's default toolset (agent nodes only).
	Tools string `json:"tools,omitempty"`

	// Action.
	Action *ActionRef `json:"action,omitempty"`

	// Agent, agent-decision and action: how the call input is built.
	Mapping map[string]Mapping `json:"mapping,omitempty"`

	Retry     *Retry `json:"retry,omitempty"`
	TimeoutMs int    `json:"timeoutMs,omitempty"`
}

// Edge connects an output port ("node.port") to an input port.
type Edge struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// AgentRef pins one exact agent revision.
type AgentRef struct {
	Key      string `json:"key"`
	Revision int    `json:"revision"`
}

// ActionRef pins one exact action contract version.
type ActionRef struct {
	ID      string `json:"id"`
	Version int    `json:"version"`
}

// Mapping builds one field of a node's call input. Exactly one of Literal,
// Pointer or Template is set.
type Mapping struct {
	Literal  json.RawMessage   `json:"literal,omitempty"`
	Pointer  *string           `json:"pointer,omitempty"`
	Template *string           `json:"template,omitempty"`
	Bindings map[string]string `json:"bindings,omitempty"`
}

// Retry is a node's retry policy. The interpreter computes every delay itself.
type Retry struct {
	MaxAttempts       int     `json:"maxAttempts,omitempty"`
	InitialIntervalMs int     `json:"initialIntervalMs,omitempty"`
	Backoff           float64 `json:"backoff,omitempty"`
	MaxIntervalMs     int     `json:"maxIntervalMs,omitempty"`
}

// Toolset is a captured toolset folder: the tools offered, a one-line
// summary shown to the agent with the tool list, and the pinned skill text.
type Toolset struct {
	Tools []string `json:"tools"`
	Skill string   `json:"skill"`
	// Summary is one line of at most MaxToolsetSummaryChars characters
	// saying what the tools are for. It is content (pinned, in the
	// checksum). Required for new toolsets; drafts and revisions saved
	// before it existed have none (ToolsetWarnings reports them).
	Summary string `json:"summary,omitempty"`
	// Approval maps a tool of Tools (actionId@version) to its approval
	// policy; the only policy is ApprovalRequired. Absent for toolsets
	// without policies, so their checksums are unchanged.
	Approval map[string]string `json:"approval,omitempty"`
	// ApprovalTimeoutMs bounds how long a call waiting for approval waits
	// before it is answered as denied (DefaultToolApprovalTimeoutMs when
	// 0; Limits.MinApprovalTimeoutMs–MaxApprovalTimeoutMs).
	ApprovalTimeoutMs int `json:"approvalTimeoutMs,omitempty"`
}

// RequiresApproval reports whether a call of tool (actionId@version) from
// this toolset waits for a person's decision.
func (t *Toolset) RequiresApproval(tool string) bool {
	return t != nil && t.Approval[tool] == ApprovalRequired
}

// ToolApprovalTimeoutMs is the wait of a call needing approval.
func (t *Toolset) ToolApprovalTimeoutMs() int {
	if t == nil || t.ApprovalTimeoutMs <= 0 {
		return DefaultToolApprovalTimeoutMs
	}
	return t.ApprovalTimeoutMs
}

// Issue is one validation finding.
type Issue struct {
	Code    string `json:"code"`
	Path    string `json:"path"`
	Message string `json:"message"`
}

// Stable validation issue codes (SPEC §2).
const (
	CodeCycle                 = "CYCLE"
	CodeDanglingEdge          = "DANGLING_EDGE"
	CodeUnreachableNode       = "UNREACHABLE_NODE"
	CodeMissingOutput         = "MISSING_OUTPUT"
	CodeIncompatiblePort      = "INCOMPATIBLE_PORT"
	CodeUnknownPort           = "UNKNOWN_PORT"
	CodeDuplicateNode         = "DUPLICATE_NODE"
	CodeMissingDependency     = "MISSING_DEPENDENCY"
	CodeUnsupportedActionRisk = "UNSUPPORTED_ACTION_RISK"
	CodeLimitExceeded         = "LIMIT_EXCEEDED"
	CodeInvalidExpression     = "INVALID_EXPRESSION"
	CodeInvalidSchema         = "INVALID_SCHEMA"
	CodeInvalidMapping        = "INVALID_MAPPING"
	CodeUnknownVariable       = "UNKNOWN_VARIABLE"
	CodeInvalidToolsPath      = "INVALID_TOOLS_PATH"
	// CodeInvalidToolsetSummary: a toolset summary that is not one line of
	// at most Limits.MaxToolsetSummaryChars characters (or holds control
	// characters).
	CodeInvalidToolsetSummary = "INVALID_TOOLSET_SUMMARY"
	// CodeMissingToolsetSummary is a warning (ToolsetWarnings), never an
	// issue: a toolset without a summary, saved before summaries existed,
	// keeps working; new toolsets are refused without one when a draft is
	// saved (see RequireToolsetSummaries).
	CodeMissingToolsetSummary = "MISSING_TOOLSET_SUMMARY"
	// CodeInvalidApprovalPolicy: a toolset approval policy that names a
	// tool the toolset does not list, or a policy other than "required".
	CodeInvalidApprovalPolicy = "INVALID_APPROVAL_POLICY"
	// CodeInvalidNode covers structural problems the codes above do not name
	// (unknown kind, a missing required field, a bad id).
	CodeInvalidNode = "INVALID_NODE"
	// CodeInvalidDocument (declared with the decode codes) is also an issue
	// code: Validate reports it for a nil document or a wrong schemaVersion
	// in a Document built in Go rather than decoded.
)

// Risk classifies what an action may do. Publication refuses External and Destructive.
type Risk string

// Action risk levels.
const (
	RiskRead           Risk = "read"
	RiskWorkspaceWrite Risk = "workspace-write"
	RiskExternal       Risk = "external"
	RiskDestructive    Risk = "destructive"
)

// ActionContract is the published contract of one action version.
type ActionContract struct {
	ID                  string          `json:"id"`
	Version             int             `json:"version"`
	Risk                Risk            `json:"risk"`
	Description         string          `json:"description,omitempty"`
	InputSchema         json.RawMessage `json:"inputSchema"`
	OutputSchema        json.RawMessage `json:"outputSchema"`
	RequiredPermissions []string        `json:"requiredPermissions"`
	TimeoutMs           int             `json:"timeoutMs"`
	// Idempotency is "none" for reads or "ledger" for writes keyed by (tenant, run, node).
	Idempotency string `json:"idempotency"`
}

// AgentContract is what publication pins of one agent revision.
type AgentContract struct {
	Key                 string          `json:"key"`
	Revision            int             `json:"revision"`
	Archived            bool            `json:"archived"`
	OutputSchema        json.RawMessage `json:"outputSchema,omitempty"`
	AllowedTools        []string        `json:"allowedTools,omitempty"`
	RequiredPermissions []string        `json:"requiredPermissions,omitempty"`
	// Hash is the sha256 of the revision's canonical content.
	Hash string `json:"hash"`
	// Skills are the tenant skill revisions the agent revision lists, in its
	// order, each with the content hash publication pinned (the catalog
	// loads them without; validation resolves and fills it). Absent for an
	// agent that lists none, so earlier checksums are unchanged.
	Skills []PinnedSkill `json:"skills,omitempty"`
	// Instructions is the revision's instructions template, as loaded for
	// the resolver: the scopes of its variables become RequiredPermissions
	// (SPEC §6). It is never pinned, encoded or part of a checksum; the Hash
	// covers it.
	Instructions string `json:"-"`
}

// SkillRef names one exact revision of a tenant skill.
type SkillRef struct {
	Key      string `json:"key"`
	Revision int    `json:"revision"`
}

// PinnedSkill is a skill revision an agent revision lists, with the content
// hash publication pinned (empty until validation resolves it).
type PinnedSkill struct {
	Key      string `json:"key"`
	Revision int    `json:"revision"`
	Hash     string `json:"hash,omitempty"`
}

// SkillContract is what the catalog knows of one skill revision.
type SkillContract struct {
	Key      string
	Revision int
	// Hash is the sha256 of the revision's canonical content.
	Hash string
	// Archived skills are refused by new publications (MISSING_DEPENDENCY).
	Archived bool
}

// Catalog resolves a document's dependencies. Implementations are in-memory
// snapshots the caller loaded beforehand; graph never performs I/O.
type Catalog interface {
	Action(id string, version int) (ActionContract, bool)
	Agent(key string, revision int) (AgentContract, bool)
	// Skill resolves a tenant skill revision an agent revision lists.
	Skill(key string, revision int) (SkillContract, bool)
}
