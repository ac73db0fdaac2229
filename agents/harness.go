package agents

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/authz"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
)

// Harness limits (SPEC §7).
const (
	// DefaultToolTimeout applies to a tool whose contract sets no timeoutMs;
	// every tool deadline is clamped to MinToolTimeout–MaxToolTimeout.
	DefaultToolTimeout = 30 * time.Second
	MinToolTimeout     = 250 * time.Millisecond
	MaxToolTimeout     = 600 * time.Second
	// MaxToolOutputBytes caps a tool result the model sees; a larger output
	// becomes {"truncated": true, "bytes": N, "preview": "..."}.
	MaxToolOutputBytes = 32 << 10
	// MaxCallsPerTurn and MaxCallsPerNode bound tool calls; calls beyond
	// them are denied (TOOL_LIMIT_EXCEEDED).
	MaxCallsPerTurn = 16
	MaxCallsPerNode = graph.MaxToolCallsPerNode
	// saveTimeout bounds a transcript save, which runs even while the
	// attempt is being cancelled so a settled call is not lost.
	saveTimeout = 10 * time.Second
)

// EventAgentTurn is the event an agent node appends per model call, with
// its usage (data.usage: input and output tokens, costUsd).
const EventAgentTurn = "agent.turn"

// EventBudgetExceeded is the event an agent node appends when the run's
// budget cannot cover its next model call, before failing with
// BUDGET_EXCEEDED: data.spent and data.allowed ({total, costUsd}: tokens
// and US dollars), data.needed (what the call needs at least), data.turn.
const EventBudgetExceeded = "agent.budget.exceeded"

// Waits of a call for its budget while calls in flight hold it.
const (
	budgetWaitMin = 50 * time.Millisecond
	budgetWaitMax = 500 * time.Millisecond
)

// Error types of agent attempts (ApplicationError types).
const (
	// ErrAgentUnavailable: the pinned revision cannot be loaded or no longer
	// matches its pinned hash, or its provider is not configured on this
	// worker. Not retryable.
	ErrAgentUnavailable = execution.ErrAgentUnavailable
	// ErrAgentOutputInvalid: the final answer is not JSON, does not match
	// the output schema or (agent-decision) the decision contract, or the
	// model refused. Not retryable.
	ErrAgentOutputInvalid = "AGENT_OUTPUT_INVALID"
	// ErrAgentMaxTurns: the model wanted more turns than maxTurns. Not retryable.
	ErrAgentMaxTurns = "AGENT_MAX_TURNS"
	// ErrAgentTimeout: the attempt used up the agent's timeout. Retryable:
	// the next attempt resumes from the saved transcript.
	ErrAgentTimeout = "AGENT_TIMEOUT"
	// ErrStaleAttempt: a later attempt already saved this node's transcript.
	ErrStaleAttempt = store.CodeStaleAttempt
	// ErrBudgetExceeded: the run's budget cannot cover the next model
	// call whatever the calls in flight return. Not retryable.
	ErrBudgetExceeded = execution.ErrBudgetExceeded
	// ErrBudgetUnpriced: the run has a cost budget and the model has no
	// price. Not retryable.
	ErrBudgetUnpriced = execution.ErrBudgetUnpriced
)

// Tool denial and failure reasons (tool.denied / tool.failed data.reason).
const (
	// ReasonNotGranted: not in the agent's allowed tools, the node's
	// toolset, the run's permissions now (its snapshot minus what was
	// revoked from its principal since), its toolGrants and, for a
	// service actor, its tool policy, at once. Checked when the tools are
	// offered and again before every call.
	ReasonNotGranted = "TOOL_NOT_GRANTED"
	// ReasonUnknownTool: the model named no known tool.
	ReasonUnknownTool = "TOOL_UNKNOWN"
	// ReasonInputInvalid: the input breaks the tool's input schema.
	ReasonInputInvalid = "TOOL_INPUT_INVALID"
	// ReasonLimitExceeded: more calls than MaxCallsPerTurn/MaxCallsPerNode.
	ReasonLimitExceeded = "TOOL_LIMIT_EXCEEDED"
	// ReasonTimeout: the call passed its deadline.
	ReasonTimeout = "TOOL_TIMEOUT"
	// ReasonUnavailable: the pinned action is not runnable on this worker.
	ReasonUnavailable = execution.ErrActionUnavailable
	// ReasonFailed: the action failed.
	ReasonFailed = execution.ErrActionFailed
	// ReasonInvalidOutput: the action's output broke its output schema.
	ReasonInvalidOutput = execution.ErrInvalidOutput
	// ReasonConflict: the call's ledger key is bound to another input.
	ReasonConflict = execution.ErrIdempotencyConflict
	// ReasonApprovalRejected: the tool needs approval (its toolset says
	// approval: required) and a person rejected the call.
	ReasonApprovalRejected = "TOOL_APPROVAL_REJECTED"
	// ReasonApprovalTimedOut: the tool needs approval and no decision
	// came within the toolset's approvalTimeoutMs.
	ReasonApprovalTimedOut = "TOOL_APPROVAL_TIMED_OUT"
)

// Store is what the harness persists through (store.Store).
type Store interface {
	GetAgentRevision(ctx context.Context, tenantID, key string, revision int) (store.AgentRevision, error)
	GetSkillRevision(ctx context.Context, tenantID, key string, revision int) (store.SkillRevision, error)
	GetAgentTranscript(ctx context.Context, tenantID, runID, nodeID string) (store.AgentTranscript, error)
	SaveAgentTranscript(ctx context.Context, t store.AgentTranscript, usage *store.Usage) error
	AppendEvents(ctx context.Context, tenantID, runID string, events []execution.EventDraft, upd *execution.RunUpdate) error
	LedgerLookup(ctx context.Context, tenantID, tool, key, inputHash string) (json.RawMessage, bool, error)
	LedgerRecord(ctx context.Context, tenantID, tool, key, inputHash string, result json.RawMessage) (json.RawMessage, error)
	ReserveBudget(ctx context.Context, k store.BudgetKey, est store.CallEstimate) (store.Reservation, error)
	ReleaseBudget(ctx context.Context, k store.BudgetKey) error
}

var _ Store = (*store.Store)(nil)

// Deps are what a Runtime needs. Store and Actions are required.
type Deps struct {
	Store   Store
	Actions *catalog.Registry
	// Providers by name; the sim provider is always added.
	Providers []provider.Provider
	// Variables resolves instructions; nil uses the scope-less built-ins.
	Variables *variables.Registry
	// Readiness, when set, is the providers' cached readiness probe: an
	// attempt whose provider it knows to be down stops before calling it,
	// with PROVIDER_UNAVAILABLE (an infrastructure fault the interpreter
	// re-dispatches without spending the node's attempt).
	Readiness *provider.Readiness
	Logger    *slog.Logger
	// Now is the clock of the events the harness appends (time.Now when nil).
	Now func() time.Time
}

// Runtime runs agent nodes. It is safe for concurrent use.
type Runtime struct {
	store     Store
	actions   *catalog.Registry
	providers map[string]provider.Provider
	vars      *variables.Registry
	ready     *provider.Readiness
	log       *slog.Logger
	now       func() time.Time

	mu      sync.Mutex
	schemas map[string]*jsonschema.Schema
}

// New builds a Runtime.
func New(d Deps) (*Runtime, error) {
	if d.Store == nil || d.Actions == nil {
		return nil, errors.New("agents: a store and an action registry are required")
	}
	r := &Runtime{store: d.Store, actions: d.Actions, providers: map[string]provider.Provider{provider.NameSim: provider.Sim{}},
		vars: d.Variables, ready: d.Readiness, log: d.Logger, now: d.Now, schemas: map[string]*jsonschema.Schema{}}
	for _, p := range d.Providers {
		if p == nil {
			return nil, errors.New("agents: nil provider")
		}
		r.providers[p.Name()] = p
	}
	if r.vars == nil {
		reg, err := variables.NewRegistry(variables.ContextSource(), variables.RunSource())
		if err != nil {
			return nil, err
		}
		r.vars = reg
	}
	if r.log == nil {
		r.log = slog.Default()
	}
	if r.now == nil {
		r.now = time.Now
	}
	return r, nil
}

// Authority answers what a run may do now. The harness asks it before it
// offers tools and again before every tool call, so a scope revoked or a
// tool policy narrowed between two calls denies the second (activities
// passes one that reads store.RunAuthority each time; package authz).
// An error fails the attempt as is (retryable unless it is a
// non-retryable ApplicationError): a call is never run on authority that
// could not be read.
type Authority interface {
	Grant(ctx context.Context) (authz.Grant, error)
}

// Job is one attempt of one agent or agent-decision node. Everything in it
// comes from the run, never from the call input.
type Job struct {
	TenantID    string
	TenantName  string
	RunID       string
	WorkflowKey string
	NodeID      string
	Attempt     int
	// Dispatch counts the re-dispatches of this attempt after
	// infrastructure faults (execution.NodeInput.Redispatch): a transcript
	// save from an earlier dispatch of the same attempt (a worker presumed
	// lost but still running) is refused as stale.
	Dispatch int
	// Decision is set for agent-decision nodes.
	Decision bool
	// Agent is the revision pinned in the compiled revision.
	Agent graph.AgentContract
	// Actions are the action contracts pinned in the compiled revision
	// (publication pins every tool an agent allows).
	Actions map[graph.ActionRef]graph.PinnedAction
	// Toolset is the node's effective toolset (node override, else the
	// document default); nil when neither selects one.
	Toolset *graph.Toolset
	// Input is the node's call input.
	Input json.RawMessage
	// Actor is who the run acts for; tool handlers receive it and its
	// RequestedBy (catalog.Call).
	Actor execution.Actor
	// Permissions is the run's permission snapshot. Authority, when set,
	// decides instead (the snapshot minus current revocations, and the
	// run's tool lists); nil decides on Permissions alone.
	Permissions  []string
	Authority    Authority
	RunStartedAt time.Time
	// Approval is the node's latest decided tool approval
	// (execution.NodeInput.Approval): it settles that call, if still
	// pending, and nothing else.
	Approval *execution.ApprovalState
	// Timeout is the node timeout; the agent's own timeoutMs bounds too.
	Timeout time.Duration
	// Heartbeat reports liveness (no details); may be nil.
	Heartbeat func()
}

func (j Job) beat() {
	if j.Heartbeat != nil {
		j.Heartbeat()
	}
}

// Result is a finished agent node.
type Result struct {
	// Output is the validated final answer.
	Output json.RawMessage
	// Outcome is "pass" or "fail" for an agent-decision node.
	Outcome string
	Turns   int
	Usage   store.Usage
	// Approval, instead of an answer, says the attempt stopped before a
	// tool call that needs a person's decision: the transcript holds the
	// call pending; an attempt given the decision (Job.Approval) resumes.
	Approval *execution.ApprovalRequest
}

// approvalNeeded stops an attempt before a call that needs approval.
type approvalNeeded struct{ req execution.ApprovalRequest }

func (e *approvalNeeded) Error() string {
	return fmt.Sprintf("tool call %d (%s) waits for approval", e.req.Call.Ordinal, e.req.Call.Tool)
}

// permanent is a non-retryable ApplicationError.
func permanent(typ string, details any, format string, args ...any) error {
	if details != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), typ, nil, details)
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf(format, args...), typ, nil)
}

// tool is a tool the node may offer.
type tool struct {
	ref      graph.ActionRef
	pinned   graph.PinnedAction
	action   catalog.Action
	spec     provider.Tool
	mutating bool
}

// attempt is the state of one Run.
type attempt struct {
	r        *Runtime
	job      Job
	def      Definition
	prov     provider.Provider
	tr       *Transcript
	offered  map[string]*tool // by function name and by actionId@version
	specs    []provider.Tool
	denials  map[string]string // actionId@version → why it is not offered
	grant    authz.Grant       // what the run may do, as last read
	schema   json.RawMessage   // effective output schema
	deadline time.Duration
}

// Run runs (or resumes) one attempt of an agent node: model turns and tool
// calls until the model gives its final answer, saving the transcript after
// every step. Errors are Temporal ApplicationErrors typed with the codes
// above (or a provider code), or ctx.Err() when the activity was cancelled.
func (r *Runtime) Run(ctx context.Context, job Job) (Result, error) {
	a, err := r.prepare(ctx, job)
	if err != nil {
		return Result{}, err
	}
	if err := a.load(ctx); err != nil {
		return Result{}, err
	}
	if err := a.providerReady(ctx); err != nil {
		return Result{}, err
	}
	actx, cancel := context.WithTimeout(ctx, a.deadline)
	defer cancel()
	for {
		job.beat()
		if err := a.interrupted(ctx, actx); err != nil {
			return Result{}, err
		}
		if c := a.tr.pending(); c != nil {
			if err := a.call(ctx, actx, c); err != nil {
				var need *approvalNeeded
				if errors.As(err, &need) {
					return Result{Turns: len(a.tr.Turns), Usage: a.tr.Usage(), Approval: &need.req}, nil
				}
				return Result{}, err
			}
			continue
		}
		if a.tr.Final != nil {
			return a.finish()
		}
		if len(a.tr.Turns) >= a.def.MaxTurns {
			return Result{}, permanent(ErrAgentMaxTurns, nil, "node %q: agent %s used all %d turns without a final answer",
				job.NodeID, a.tr.Agent, a.def.MaxTurns)
		}
		if err := a.turn(ctx, actx); err != nil {
			return Result{}, err
		}
	}
}

// providerReady stops an attempt that still needs its provider while the
// cached readiness probe knows it to be down: PROVIDER_UNAVAILABLE at once,
// before any model call (retryable; the interpreter re-dispatches the same
// attempt as an infrastructure fault). An unknown verdict lets the attempt
// go on, as does a provider that is not probed (sim).
func (a *attempt) providerReady(ctx context.Context) error {
	if a.r.ready == nil || a.tr.Final != nil {
		return nil
	}
	st, ok := a.r.ready.Check(ctx, a.def.Provider)
	if !ok || !st.Down() {
		return nil
	}
	return temporal.NewApplicationError(fmt.Sprintf("node %q: provider %s is unavailable (readiness probe at %s: %s); the attempt goes out again once it is back",
		a.job.NodeID, a.def.Provider, st.CheckedAt.UTC().Format(time.RFC3339), st.Detail), provider.CodeUnavailable)
}

// interrupted reports the attempt's cancellation or the agent deadline.
func (a *attempt) interrupted(ctx, actx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if actx.Err() != nil {
		return temporal.NewApplicationError(fmt.Sprintf("node %q: agent %s did not finish within %s; the next attempt resumes from its transcript",
			a.job.NodeID, a.tr.Agent, a.deadline), ErrAgentTimeout)
	}
	return nil
}

// prepare loads and verifies the pinned revision, picks the provider and
// computes the tools to offer.
func (r *Runtime) prepare(ctx context.Context, job Job) (*attempt, error) {
	ref := graph.AgentRef{Key: job.Agent.Key, Revision: job.Agent.Revision}
	rev, err := r.store.GetAgentRevision(ctx, job.TenantID, ref.Key, ref.Revision)
	if err != nil {
		if errors.Is(err, failure.ErrNotFound) {
			return nil, permanent(ErrAgentUnavailable, nil, "node %q: agent revision %s is not stored", job.NodeID, ref)
		}
		return nil, err
	}
	var def Definition
	if err := json.Unmarshal(rev.Content, &def); err != nil {
		return nil, permanent(ErrAgentUnavailable, nil, "node %q: agent revision %s cannot be read: %v", job.NodeID, ref, err)
	}
	def = def.Normalize()
	if h, err := def.Hash(); err != nil || h != job.Agent.Hash || rev.Hash != job.Agent.Hash {
		return nil, permanent(ErrAgentUnavailable, nil, "node %q: agent revision %s does not match the hash pinned at publication", job.NodeID, ref)
	}
	prov, ok := r.providers[def.Provider]
	if !ok {
		return nil, permanent(ErrAgentUnavailable, nil, "node %q: provider %q of agent %s is not configured on this worker", job.NodeID, def.Provider, ref)
	}
	timeout := time.Duration(def.TimeoutMs) * time.Millisecond
	if job.Timeout > 0 {
		timeout = min(timeout, job.Timeout)
	}
	a := &attempt{r: r, job: job, def: def, prov: prov, offered: map[string]*tool{}, denials: map[string]string{},
		schema: EffectiveOutputSchema(def.OutputSchema, job.Decision), deadline: timeout}
	if a.grant, err = a.authorize(ctx); err != nil {
		return nil, err
	}
	a.offerTools()
	return a, nil
}

// authorize reads what the run may do now.
func (a *attempt) authorize(ctx context.Context) (authz.Grant, error) {
	if a.job.Authority == nil {
		return authz.Static(a.job.Permissions), nil
	}
	g, err := a.job.Authority.Grant(ctx)
	var appErr *temporal.ApplicationError
	switch {
	case err == nil:
		return g, nil
	case ctx.Err() != nil:
		return authz.Grant{}, ctx.Err()
	case errors.As(err, &appErr):
		return authz.Grant{}, err // Temporal reads its type and retryability only unwrapped
	}
	return authz.Grant{}, fmt.Errorf("agents: node %q: read the run's authority: %w", a.job.NodeID, err)
}

// offerTools computes the offer: a tool is offered only if it is in the
// agent's allowed tools AND the node's toolset (when one is selected) AND
// the run's grant allows it (its permissions now hold the tool's, and it
// is in the run's toolGrants and a service actor's tool policy) — and it
// is pinned, runnable (read or workspace-write) and registered on this
// worker with the pinned contract. Every other tool gets a denial reason.
func (a *attempt) offerTools() {
	inToolset := func(string) bool { return true }
	if a.job.Toolset != nil {
		set := map[string]bool{}
		for _, t := range a.job.Toolset.Tools {
			set[strings.TrimSpace(t)] = true
		}
		inToolset = func(t string) bool { return set[t] }
	}
	used := map[string]bool{}
	for _, t := range a.def.AllowedTools {
		ref, err := graph.ParseActionRef(t)
		if err != nil {
			continue
		}
		key := ref.String()
		pinned, ok := a.job.Actions[ref]
		act, registered := a.r.actions.Lookup(ref.ID, ref.Version)
		decision := a.grant.Tool(key, pinned.RequiredPermissions)
		switch {
		case !inToolset(key):
			a.denials[key] = "it is not in the node's toolset"
		case !ok:
			a.denials[key] = "its contract is not pinned in this revision"
		case pinned.Risk != graph.RiskRead && pinned.Risk != graph.RiskWorkspaceWrite:
			a.denials[key] = fmt.Sprintf("its risk %q is never run", pinned.Risk)
		case !registered || catalog.ContractHash(act.Contract) != pinned.Hash:
			a.denials[key] = "this worker does not run its pinned contract"
		case !decision.Allowed:
			a.denials[key] = decision.Why
		default:
			name := functionName(ref, used)
			desc := pinned.Description
			if a.job.Toolset.RequiresApproval(key) {
				desc = strings.TrimSpace(desc + " Each call waits for a person's approval; a rejected call is answered as denied.")
			}
			tl := &tool{ref: ref, pinned: pinned, action: act,
				mutating: pinned.Risk == graph.RiskWorkspaceWrite || pinned.Idempotency == catalog.IdempotencyLedger,
				spec:     provider.Tool{Name: name, Ref: key, Description: desc, Parameters: pinned.InputSchema}}
			a.offered[name], a.offered[key] = tl, tl
			a.specs = append(a.specs, tl.spec)
		}
	}
}

// functionName is a tool's function name: ^[a-zA-Z0-9_-]{1,64}$, unique in used.
func functionName(ref graph.ActionRef, used map[string]bool) string {
	base := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_' || r == '-' {
			return r
		}
		return '_'
	}, ref.ID)
	suffix := "_v" + strconv.Itoa(ref.Version)
	if len(base)+len(suffix) > 60 {
		base = base[:60-len(suffix)]
	}
	name := base + suffix
	for i := 2; used[name]; i++ {
		name = base + suffix + "_" + strconv.Itoa(i)
	}
	used[name] = true
	return name
}

// load resumes the saved transcript (appending its outbox first, in case
// the previous attempt saved a step but not its events) or starts one.
func (a *attempt) load(ctx context.Context) error {
	saved, err := a.r.store.GetAgentTranscript(ctx, a.job.TenantID, a.job.RunID, a.job.NodeID)
	switch {
	case errors.Is(err, failure.ErrNotFound):
		return a.start(ctx)
	case err != nil:
		return err
	}
	if len(saved.Outbox) > 0 {
		if err := a.r.store.AppendEvents(ctx, a.job.TenantID, a.job.RunID, saved.Outbox, nil); err != nil {
			return fmt.Errorf("agents: append saved events: %w", err)
		}
	}
	var tr Transcript
	if err := json.Unmarshal(saved.Transcript, &tr); err != nil {
		return permanent(ErrAgentUnavailable, nil, "node %q: saved transcript cannot be read: %v", a.job.NodeID, err)
	}
	if tr.Hash != a.job.Agent.Hash {
		return permanent(ErrAgentUnavailable, nil, "node %q: saved transcript belongs to another agent revision", a.job.NodeID)
	}
	a.tr = &tr
	return nil
}

// start builds the first messages — the system message and the call input
// — and saves them so every attempt sees the same resolved text. The system
// message is, in this order, each part after a blank line:
//
//  1. the agent revision's instructions, resolved with the run's context;
//  2. the text of each tenant skill the revision lists, in its order
//     (the revisions pinned at publication);
//  3. the node's toolset summary, as "Tools: <summary>" (when it has one);
//  4. the node's toolset skill;
//  5. for an agent-decision node, the decision contract.
func (a *attempt) start(ctx context.Context) error {
	sys, err := a.instructions(ctx)
	if err != nil {
		return err
	}
	skills, err := a.loadSkills(ctx)
	if err != nil {
		return err
	}
	applied := make([]string, 0, len(skills))
	for _, sk := range skills {
		sys += "\n\n" + sk.Text
		applied = append(applied, graph.SkillRef{Key: sk.Key, Revision: sk.Revision}.String())
	}
	if ts := a.job.Toolset; ts != nil {
		if summary := strings.TrimSpace(ts.Summary); summary != "" {
			sys += "\n\nTools: " + summary
		}
		if strings.TrimSpace(ts.Skill) != "" {
			sys += "\n\n" + ts.Skill
		}
	}
	if a.job.Decision {
		sys += "\n\nDecide: answer with a JSON object whose \"outcome\" is \"pass\" or \"fail\"."
	}
	input, err := graph.Canonical(a.job.Input)
	if err != nil {
		return permanent(execution.ErrSchemaViolation, nil, "node %q: call input is not JSON: %v", a.job.NodeID, err)
	}
	a.tr = &Transcript{
		Version: TranscriptVersion, Agent: graph.AgentRef{Key: a.job.Agent.Key, Revision: a.job.Agent.Revision}.String(),
		Hash: a.job.Agent.Hash, Provider: a.def.Provider, Model: a.def.Model, Skills: applied,
		Messages: []provider.Message{{Role: provider.RoleSystem, Content: sys}, {Role: provider.RoleUser, Content: string(input)}},
		Turns:    []TurnRecord{}, Calls: []CallRecord{},
	}
	return a.save(ctx, nil)
}

// loadSkills loads the tenant skill revisions the agent revision lists, in
// its order, each checked against the content hash publication pinned
// (AGENT_UNAVAILABLE when one is not pinned, not stored or changed).
// Archived skills still load: archiving hides a skill from new
// publications only.
func (a *attempt) loadSkills(ctx context.Context) ([]store.SkillRevision, error) {
	j := a.job
	out := make([]store.SkillRevision, 0, len(a.def.Skills))
	for _, ref := range a.def.Skills {
		var pinned *graph.PinnedSkill
		for i, p := range j.Agent.Skills {
			if p.Key == ref.Key && p.Revision == ref.Revision {
				pinned = &j.Agent.Skills[i]
			}
		}
		if pinned == nil || pinned.Hash == "" {
			return nil, permanent(ErrAgentUnavailable, nil, "node %q: skill %s of agent %s is not pinned in this revision", j.NodeID, ref, j.Agent.Key)
		}
		rev, err := a.r.store.GetSkillRevision(ctx, j.TenantID, ref.Key, ref.Revision)
		if errors.Is(err, failure.ErrNotFound) {
			return nil, permanent(ErrAgentUnavailable, nil, "node %q: skill revision %s is not stored", j.NodeID, ref)
		}
		if err != nil {
			return nil, err
		}
		h, err := Skill{Name: rev.Name, Text: rev.Text}.Hash()
		if err != nil || h != pinned.Hash || rev.Hash != pinned.Hash {
			return nil, permanent(ErrAgentUnavailable, nil, "node %q: skill revision %s does not match the hash pinned at publication", j.NodeID, ref)
		}
		out = append(out, rev)
	}
	return out, nil
}

// instructions resolves the instructions template with the run's context
// (the agent's own key bound as agentId, so {{ agent.name }} works).
func (a *attempt) instructions(ctx context.Context) (string, error) {
	j := a.job
	today := j.RunStartedAt
	if today.IsZero() {
		today = a.r.now()
	}
	out, err := a.r.vars.Resolve(ctx, a.def.Instructions, variables.Request{
		TenantID: j.TenantID, TenantName: j.TenantName,
		Actor:       variables.Actor{Sub: j.Actor.Sub, Name: j.Actor.Name, Email: j.Actor.Email},
		Permissions: j.Permissions, RunID: j.RunID, WorkflowKey: j.WorkflowKey, Today: today.UTC(),
		Bindings: map[string]string{variables.BindingAgentID: j.Agent.Key},
	})
	if err == nil {
		return out, nil
	}
	var ref *variables.Refusal
	if errors.As(err, &ref) {
		switch {
		case ref.Retryable():
			return "", temporal.NewApplicationErrorWithCause(ref.Message, ref.Code, err)
		case ref.Code == variables.CodeMissingScope:
			return "", permanent(execution.ErrPermissionDenied, map[string]any{"missing": ref.Scopes},
				"node %q: agent instructions: %s", j.NodeID, ref.Message)
		case ref.Code == variables.CodeCancelled && ctx.Err() != nil:
			return "", ctx.Err()
		}
		return "", permanent(execution.ErrMappingUnresolved, nil, "node %q: agent instructions: %s", j.NodeID, ref.Message)
	}
	return "", err
}

// turn asks the model for its next step and saves it with its usage.
// Under a run budget the call first reserves what it may use (reserve),
// passes the reservation's output-token limit to the provider, and the
// save settles the reservation with the real usage; a failed call
// releases it.
func (a *attempt) turn(ctx, actx context.Context) error {
	start := a.r.now()
	n := len(a.tr.Turns) + 1
	req := provider.Request{
		Model: a.def.Model, Messages: a.tr.Messages, Tools: a.specs,
		OutputSchema: a.schema, Decision: a.job.Decision, Sim: a.def.Sim,
	}
	res, err := a.reserve(ctx, actx, req, n)
	if err != nil {
		return err
	}
	req.MaxOutputTokens = res.OutputLimit
	if m := a.def.MaxOutputTokens; m > 0 && (req.MaxOutputTokens == 0 || req.MaxOutputTokens > m) {
		req.MaxOutputTokens = m
	}
	reply, err := a.prov.Turn(actx, req)
	if err != nil {
		if res.Budgeted {
			a.release(ctx, n)
		}
		return a.providerError(ctx, actx, err)
	}
	a.r.ready.Observe(a.def.Provider, nil)
	msg := provider.Message{Role: provider.RoleAssistant, Content: reply.Content, ToolCalls: reply.ToolCalls}
	if len(reply.ToolCalls) == 0 && reply.Refusal != "" {
		msg.Content = reply.Refusal
	}
	a.tr.Messages = append(a.tr.Messages, msg)
	for _, c := range reply.ToolCalls {
		a.tr.Calls = append(a.tr.Calls, CallRecord{Ordinal: len(a.tr.Calls) + 1, Turn: n, CallID: c.ID, Name: c.Name,
			Arguments: c.Arguments, Status: CallPending})
	}
	if len(reply.ToolCalls) == 0 {
		a.tr.Final = &Final{Turn: n, Content: reply.Content, Refusal: reply.Refusal}
	}
	model := reply.Model
	if model == "" {
		model = a.def.Model
	}
	rec := TurnRecord{Turn: n, Attempt: a.job.Attempt, Model: model, ToolCalls: len(reply.ToolCalls),
		Final: len(reply.ToolCalls) == 0, Usage: reply.Usage, DurationMs: a.r.now().Sub(start).Milliseconds()}
	a.tr.Turns = append(a.tr.Turns, rec)
	offered := make([]string, 0, len(a.specs))
	for _, t := range a.specs {
		offered = append(offered, t.Ref)
	}
	ev := a.event(EventAgentTurn, n, map[string]any{
		"turn": n, "provider": a.def.Provider, "model": model, "toolCalls": rec.ToolCalls, "final": rec.Final,
		"durationMs": rec.DurationMs, "tools": offered,
		// Key names avoid "token", which evidence redaction hides.
		"usage": map[string]any{"input": reply.Usage.InputTokens, "output": reply.Usage.OutputTokens,
			"total": reply.Usage.InputTokens + reply.Usage.OutputTokens, "costUsd": reply.Usage.CostUSD, "priced": reply.Usage.Priced},
	})
	usage := store.Usage{Calls: 1, InputTokens: reply.Usage.InputTokens, OutputTokens: reply.Usage.OutputTokens, CostUSD: reply.Usage.CostUSD}
	return a.save(ctx, &usage, ev)
}

// budgetKey names turn n of this attempt's node.
func (a *attempt) budgetKey(n int) store.BudgetKey {
	j := a.job
	return store.BudgetKey{TenantID: j.TenantID, RunID: j.RunID, NodeID: j.NodeID, Attempt: j.Attempt, Turn: n}
}

// estimate is what req will use, as the provider tells it (a token per 4
// bytes and no price when it cannot), capped by the agent's maxOutputTokens.
func (a *attempt) estimate(req provider.Request) store.CallEstimate {
	e := provider.Estimate{InputTokens: provider.EstimateInputTokens(req)}
	if est, ok := a.prov.(provider.Estimator); ok {
		e = est.Estimate(req)
	}
	ce := store.CallEstimate{InputTokens: e.InputTokens, OutputTokens: e.OutputTokens, MaxOutputTokens: a.def.MaxOutputTokens,
		CostUSD: e.CostUSD}
	if e.Price != nil {
		ce.Price = &store.TokenPrice{InputPerMTok: e.Price.InputPerMTok, OutputPerMTok: e.Price.OutputPerMTok}
	}
	return ce
}

// reserve reserves turn n's share of the run's budget before the call
// (store.ReserveBudget, in PostgreSQL, so parallel agent nodes of the run
// never both take its last part). While calls in flight hold what it
// needs it waits for them to settle, heartbeating; a budget that cannot
// cover the call fails the node: BUDGET_EXCEEDED, after an
// agent.budget.exceeded event saying what was spent and allowed.
func (a *attempt) reserve(ctx, actx context.Context, req provider.Request, n int) (store.Reservation, error) {
	est := a.estimate(req)
	wait := budgetWaitMin
	for {
		res, err := a.r.store.ReserveBudget(ctx, a.budgetKey(n), est)
		var exceeded *store.BudgetExceededError
		switch {
		case err == nil:
			return res, nil
		case errors.As(err, &exceeded):
			return res, a.budgetExceeded(ctx, n, exceeded)
		case errors.Is(err, store.ErrBudgetUnpriced):
			return res, permanent(ErrBudgetUnpriced, nil, "node %q: the run has a cost budget (maxCostUsd) and model %q of provider %s has no price (WEFT_OPENAI_PRICES), so its calls cannot be bounded",
				a.job.NodeID, a.def.Model, a.def.Provider)
		case failure.CodeOf(err) == store.CodeStaleAttempt:
			return res, permanent(ErrStaleAttempt, nil, "node %q: %v", a.job.NodeID, err)
		case !errors.Is(err, store.ErrBudgetBusy):
			if ctx.Err() != nil {
				return res, ctx.Err()
			}
			return res, fmt.Errorf("agents: node %q: reserve budget: %w", a.job.NodeID, err)
		}
		a.job.beat()
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return res, ctx.Err()
		case <-actx.Done():
			t.Stop()
			return res, a.interrupted(ctx, actx)
		case <-t.C:
		}
		wait = min(wait*2, budgetWaitMax)
	}
}

// release gives back turn n's reservation after a failed call. It runs
// even while the attempt is being cancelled; a release that fails is left
// to the node's next reservation, which releases what earlier calls held.
func (a *attempt) release(ctx context.Context, n int) {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	if err := a.r.store.ReleaseBudget(rctx, a.budgetKey(n)); err != nil {
		a.r.log.Warn("release budget reservation", "run", a.job.RunID, "node", a.job.NodeID, "turn", n, "err", err)
	}
}

// budgetExceeded records the refusal and fails the node, not retryable.
func (a *attempt) budgetExceeded(ctx context.Context, n int, e *store.BudgetExceededError) error {
	j := a.job
	// Key names avoid "token", which evidence redaction hides.
	data := map[string]any{
		"turn": n, "dimension": e.Dimension,
		"spent":   map[string]any{"total": e.SpentTokens, "costUsd": e.SpentCostUSD},
		"allowed": map[string]any{"total": e.AllowedTokens, "costUsd": e.AllowedCostUSD},
		"needed":  map[string]any{"total": e.NeededTokens, "costUsd": e.NeededCostUSD},
	}
	ev := a.event(EventBudgetExceeded, n, data)
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	if err := a.r.store.AppendEvents(sctx, j.TenantID, j.RunID, []execution.EventDraft{ev}, nil); err != nil {
		return fmt.Errorf("agents: append %s: %w", EventBudgetExceeded, err)
	}
	details := map[string]any{"dimension": e.Dimension, "spentTokens": e.SpentTokens, "spentCostUsd": e.SpentCostUSD,
		"neededTokens": e.NeededTokens, "neededCostUsd": e.NeededCostUSD}
	if e.AllowedTokens != nil {
		details["maxTokens"] = *e.AllowedTokens
	}
	if e.AllowedCostUSD != nil {
		details["maxCostUsd"] = *e.AllowedCostUSD
	}
	return permanent(ErrBudgetExceeded, details, "node %q: %s", j.NodeID, e.Error())
}

// providerError turns a provider failure into the attempt's error.
func (a *attempt) providerError(ctx, actx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if actx.Err() != nil {
		return a.interrupted(ctx, actx)
	}
	pe, ok := provider.AsError(err)
	a.r.ready.Observe(a.def.Provider, err)
	if !ok {
		return temporal.NewApplicationErrorWithCause(fmt.Sprintf("node %q: provider %s: %v", a.job.NodeID, a.def.Provider, err),
			provider.CodeUnavailable, err)
	}
	msg := fmt.Sprintf("node %q: provider %s: %s", a.job.NodeID, a.def.Provider, pe.Message)
	details := map[string]any{"status": pe.Status}
	if pe.RetryAfter > 0 {
		details["retryAfterMs"] = pe.RetryAfter.Milliseconds()
		msg += fmt.Sprintf(" (the endpoint asked to retry after %s)", pe.RetryAfter)
	}
	if !pe.Retryable {
		return temporal.NewNonRetryableApplicationError(msg, pe.Code, nil, details)
	}
	return temporal.NewApplicationErrorWithOptions(msg, pe.Code, temporal.ApplicationErrorOptions{
		Details: []any{details}, NextRetryDelay: pe.RetryAfter})
}

// finish validates the final answer.
func (a *attempt) finish() (Result, error) {
	j, f := a.job, a.tr.Final
	res := Result{Turns: len(a.tr.Turns), Usage: a.tr.Usage()}
	if f.Refusal != "" {
		return res, permanent(ErrAgentOutputInvalid, nil, "node %q: the model refused to answer: %s", j.NodeID, truncate(f.Refusal, 500))
	}
	raw := stripFence(f.Content)
	v, err := graph.DecodeValue(raw)
	if err != nil {
		return res, permanent(ErrAgentOutputInvalid, nil, "node %q: the final answer is not JSON: %s", j.NodeID, truncate(f.Content, 200))
	}
	out, err := json.Marshal(v)
	if err != nil {
		return res, permanent(ErrAgentOutputInvalid, nil, "node %q: the final answer cannot be encoded: %v", j.NodeID, err)
	}
	for _, s := range []json.RawMessage{a.def.OutputSchema, a.schema} {
		compiled, err := a.r.compile(s)
		if err != nil {
			return res, permanent(ErrAgentOutputInvalid, nil, "node %q: output schema: %v", j.NodeID, err)
		}
		if err := graph.ValidateValue(compiled, out); err != nil {
			return res, permanent(ErrAgentOutputInvalid, map[string]any{"output": truncate(string(out), 2000)},
				"node %q: the final answer of agent %s does not match its output schema: %s", j.NodeID, a.tr.Agent, firstLine(err.Error()))
		}
	}
	res.Output = out
	if j.Decision {
		var d struct {
			Outcome string `json:"outcome"`
		}
		_ = json.Unmarshal(out, &d)
		if d.Outcome != provider.OutcomePass && d.Outcome != provider.OutcomeFail {
			return res, permanent(ErrAgentOutputInvalid, nil, "node %q: a decision's outcome must be pass or fail", j.NodeID)
		}
		res.Outcome = d.Outcome
	}
	return res, nil
}

// stripFence removes one Markdown code fence around a JSON answer.
func stripFence(s string) json.RawMessage {
	s = strings.TrimSpace(s)
	if rest, ok := strings.CutPrefix(s, "```"); ok && strings.HasSuffix(rest, "```") {
		rest = strings.TrimSuffix(rest, "```")
		if i := strings.IndexByte(rest, '\n'); i >= 0 && !strings.ContainsAny(rest[:i], "{[\"") {
			rest = rest[i+1:]
		}
		s = strings.TrimSpace(rest)
	}
	return json.RawMessage(s)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	s = s[:n]
	for !utf8.ValidString(s) {
		s = s[:len(s)-1]
	}
	return s + "…"
}

// maxInputViolations bounds the schema violations a tool.denied event lists.
const maxInputViolations = 20

// call settles one pending tool call: denied (not offered, over a limit,
// invalid input), or run under its deadline — through the ledger when it
// mutates — and completed or failed. It is saved with its events.
func (a *attempt) call(ctx, actx context.Context, c *CallRecord) error {
	j := a.job
	switch {
	case c.Ordinal > MaxCallsPerNode:
		return a.deny(ctx, c, ReasonLimitExceeded, fmt.Sprintf("a node makes at most %d tool calls", MaxCallsPerNode), nil)
	case a.callIndexInTurn(c) >= MaxCallsPerTurn:
		return a.deny(ctx, c, ReasonLimitExceeded, fmt.Sprintf("a turn makes at most %d tool calls", MaxCallsPerTurn), nil)
	}
	t, ok := a.offered[c.Name]
	if !ok {
		return a.denyUnoffered(ctx, c)
	}
	c.Tool = t.ref.String()
	input := json.RawMessage(strings.TrimSpace(c.Arguments))
	if len(input) == 0 {
		input = json.RawMessage(`{}`)
	}
	inSchema, err := a.r.compile(t.pinned.InputSchema)
	if err != nil {
		return a.fail(ctx, c, ReasonUnavailable, "the tool's input schema does not compile", nil)
	}
	// One check before anything runs: the contract's input schema. The
	// subset SPEC §7 names (type, enum, required, properties,
	// additionalProperties, items) is JSON Schema, so whatever it refuses is
	// refused here, every violation listed.
	switch errs, err := graph.SchemaErrors(inSchema, input, maxInputViolations); {
	case err != nil:
		return a.deny(ctx, c, ReasonInputInvalid, "the input is not a single JSON value", nil)
	case errs != nil:
		return a.deny(ctx, c, ReasonInputInvalid, fmt.Sprintf("the input does not match the tool's input schema: %s at %q", errs[0].Message, errs[0].Path),
			map[string]any{"errors": errs})
	}
	canon, err := graph.Canonical(input)
	if err != nil {
		return a.deny(ctx, c, ReasonInputInvalid, "the input is not JSON", nil)
	}
	inputHash := graph.SHA256Hex(canon)
	// A mutating call whose result the ledger already holds ran before (an
	// earlier attempt was cut short after the write): it is replayed, not
	// run, under the authority it ran with. Any other call is re-authorized
	// now, so a scope revoked or a policy narrowed since the last call
	// denies it before anything runs.
	var replayed json.RawMessage
	var conflict error
	if t.mutating {
		c.LedgerKey = LedgerKey(j.RunID, j.NodeID, c.Ordinal)
		first, found, err := a.r.store.LedgerLookup(ctx, j.TenantID, c.Tool, c.LedgerKey, inputHash)
		switch {
		case failure.CodeOf(err) == failure.CodeIdempotencyConflict:
			conflict = err
		case err != nil:
			return err
		case found:
			replayed = first
		}
	}
	if replayed == nil && conflict == nil {
		g, err := a.authorize(ctx)
		if err != nil {
			return err
		}
		a.grant = g
		if d := g.Tool(c.Tool, t.pinned.RequiredPermissions); !d.Allowed {
			var details map[string]any
			if len(d.Missing) > 0 {
				details = map[string]any{"missing": d.Missing}
			}
			return a.deny(ctx, c, ReasonNotGranted, fmt.Sprintf("%s is no longer granted: %s", c.Tool, d.Why), details)
		}
		// The toolset requires a person's decision: nothing about the
		// call runs before it (no tool.started, no handler, no ledger
		// entry). Without one the attempt stops here and the node waits.
		if a.job.Toolset.RequiresApproval(c.Tool) {
			if run, err := a.approved(ctx, c, canon); !run {
				return err // asked for, or settled as denied
			}
		}
	}

	startData := map[string]any{"tool": c.Tool, "ordinal": c.Ordinal, "turn": c.Turn, "callId": c.CallID, "inputBytes": len(canon)}
	evidence(startData, "input", canon)
	started := a.event(execution.EventToolStarted, c.Ordinal, startData)
	if err := a.r.store.AppendEvents(ctx, j.TenantID, j.RunID, []execution.EventDraft{started}, nil); err != nil {
		return fmt.Errorf("agents: append tool.started: %w", err)
	}
	begin := a.r.now()

	var result json.RawMessage
	switch {
	case conflict != nil:
		return a.conflict(ctx, c, conflict)
	case replayed != nil:
		c.Replayed = true
		result = replayed
	}
	if result == nil {
		out, reason, msg, err := a.execute(ctx, actx, t, c, input)
		if err != nil {
			return err // cancelled, or cut by the agent deadline: the call stays pending
		}
		if reason != "" {
			return a.fail(ctx, c, reason, msg, nil)
		}
		outSchema, err := a.r.compile(t.pinned.OutputSchema)
		if err != nil {
			return a.fail(ctx, c, ReasonUnavailable, "the tool's output schema does not compile", nil)
		}
		if err := graph.ValidateValue(outSchema, out); err != nil {
			return a.fail(ctx, c, ReasonInvalidOutput, "the tool's output does not match its output schema: "+firstLine(err.Error()), nil)
		}
		result = out
		if t.mutating {
			bound, err := a.r.store.LedgerRecord(ctx, j.TenantID, c.Tool, c.LedgerKey, inputHash, BoundOutput(out))
			switch {
			case failure.CodeOf(err) == failure.CodeIdempotencyConflict:
				return a.conflict(ctx, c, err)
			case err != nil:
				return err
			}
			result = bound
		}
	}
	bounded := BoundOutput(result)
	c.Truncated = len(bounded) != len(compact(result)) || c.Truncated
	doneData := map[string]any{"tool": c.Tool, "ordinal": c.Ordinal, "outputBytes": len(compact(result)), "truncated": c.Truncated,
		"replayed": c.Replayed, "durationMs": a.r.now().Sub(begin).Milliseconds()}
	evidence(doneData, "output", bounded)
	return a.settle(ctx, c, CallCompleted, "", "", string(bounded), a.event(execution.EventToolCompleted, c.Ordinal, doneData))
}

// approved lets an approved call go on (run), denies a rejected or timed
// out one (settled and saved: a later attempt never asks again; err is
// the save's), or stops the attempt to ask (err is approvalNeeded). The
// decision applies to this call only: its ordinal and tool must match.
func (a *attempt) approved(ctx context.Context, c *CallRecord, input json.RawMessage) (run bool, err error) {
	d := a.job.Approval
	if !d.Decided() || d.Call == nil || d.Call.Ordinal != c.Ordinal || d.Call.Tool != c.Tool {
		call := execution.ApprovalCall{Ordinal: c.Ordinal, Turn: c.Turn, Tool: c.Tool, InputBytes: len(input)}
		if shown, err := store.EvidenceData(input); err == nil && len(shown) <= execution.MaxApprovalInputBytes {
			call.Input = shown // redacted like evidence: this travels in the run's history
		} else {
			call.InputOmitted = true
		}
		return false, &approvalNeeded{req: execution.ApprovalRequest{Call: call, TimeoutMs: int64(a.job.Toolset.ToolApprovalTimeoutMs())}}
	}
	details := map[string]any{"request": d.Request}
	if d.Actor != nil {
		details["decidedBy"] = d.Actor
	}
	if d.Comment != "" {
		details["comment"] = d.Comment
	}
	switch d.Status {
	case execution.ApprovalApproved:
		return true, nil
	case execution.ApprovalRejected:
		msg := fmt.Sprintf("%s needs approval and the call was rejected", c.Tool)
		if d.Comment != "" {
			msg += ": " + d.Comment
		}
		return false, a.deny(ctx, c, ReasonApprovalRejected, msg, details)
	}
	return false, a.deny(ctx, c, ReasonApprovalTimedOut,
		fmt.Sprintf("%s needs approval and no decision came within %s", c.Tool, time.Duration(d.TimeoutMs)*time.Millisecond), details)
}

// maxEvidenceValueBytes bounds a tool input or output copied into event
// data, so the event's own fields always survive the store's 8 KiB bound.
const maxEvidenceValueBytes = 4 << 10

// evidence puts value into data[field] when it is small; a larger one is
// left out and data[field+"Omitted"] says so (the event carries its size).
func evidence(data map[string]any, field string, value json.RawMessage) {
	if len(value) <= maxEvidenceValueBytes {
		data[field] = value
		return
	}
	data[field+"Omitted"] = true
}

// callIndexInTurn is c's position among its turn's calls.
func (a *attempt) callIndexInTurn(c *CallRecord) int {
	i := 0
	for _, o := range a.tr.Calls {
		if o.Ordinal == c.Ordinal {
			return i
		}
		if o.Turn == c.Turn {
			i++
		}
	}
	return i
}

// execute runs the handler under the call's deadline (the contract's
// timeoutMs, default 30 s, clamped to 250 ms–600 s, and never past the
// agent's deadline). The handler runs on its own goroutine so a handler
// that ignores its context cannot hold the node past the deadline. The
// tenant, run and node come from the job, never from the input.
func (a *attempt) execute(ctx, actx context.Context, t *tool, c *CallRecord, input json.RawMessage) (out json.RawMessage, reason, msg string, err error) {
	timeout := ToolTimeout(t.pinned.TimeoutMs)
	cctx, cancel := context.WithTimeout(actx, timeout)
	defer cancel()
	type outcome struct {
		out json.RawMessage
		err error
	}
	done := make(chan outcome, 1)
	call := catalog.Call{
		TenantID: a.job.TenantID, RunID: a.job.RunID, NodeID: a.job.NodeID, Attempt: a.job.Attempt,
		Actor: a.job.Actor, RequestedBy: a.job.Actor.RequestedBy(),
		IdempotencyKey: LedgerKey(a.job.RunID, a.job.NodeID, c.Ordinal),
		Input:          input, Permissions: a.grant.Permissions,
		Heartbeat: func(...any) { a.job.beat() }, // liveness only: details are dropped
	}
	go func() {
		defer func() {
			if p := recover(); p != nil {
				a.r.log.Error("tool handler panicked", "tool", c.Tool, "node", a.job.NodeID, "panic", p)
				done <- outcome{err: fmt.Errorf("%s panicked", c.Tool)}
			}
		}()
		o, e := t.action.Handler(cctx, call)
		done <- outcome{o, e}
	}()
	var res outcome
	select {
	case res = <-done:
	case <-cctx.Done():
	}
	switch {
	case ctx.Err() != nil:
		return nil, "", "", ctx.Err()
	case actx.Err() != nil:
		return nil, "", "", a.interrupted(ctx, actx)
	case cctx.Err() != nil && res.out == nil && res.err == nil, res.err != nil && cctx.Err() != nil:
		return nil, ReasonTimeout, fmt.Sprintf("%s did not finish within %s", c.Tool, timeout), nil
	case res.err != nil:
		var appErr *temporal.ApplicationError
		if errors.As(res.err, &appErr) && appErr.Type() != "" {
			return nil, appErr.Type(), appErr.Message(), nil
		}
		return nil, ReasonFailed, res.err.Error(), nil
	case !json.Valid(res.out):
		return nil, ReasonInvalidOutput, c.Tool + " returned invalid JSON", nil
	}
	return res.out, "", "", nil
}

// ToolTimeout is a tool call's deadline for a contract timeoutMs.
func ToolTimeout(ms int) time.Duration {
	d := time.Duration(ms) * time.Millisecond
	if ms <= 0 {
		d = DefaultToolTimeout
	}
	return min(max(d, MinToolTimeout), MaxToolTimeout)
}

// BoundOutput caps a tool output at MaxToolOutputBytes: compact JSON as is,
// or {"truncated": true, "bytes": N, "preview": "<first bytes>"}.
func BoundOutput(out json.RawMessage) json.RawMessage {
	c := compact(out)
	if len(c) <= MaxToolOutputBytes {
		return c
	}
	n := MaxToolOutputBytes - 64
	for {
		p := c[:max(n, 0)]
		for len(p) > 0 && !utf8.Valid(p) {
			p = p[:len(p)-1]
		}
		env, err := json.Marshal(map[string]any{"truncated": true, "bytes": len(c), "preview": string(p)})
		if err != nil {
			return json.RawMessage(`{"truncated":true}`)
		}
		if len(env) <= MaxToolOutputBytes || n <= 0 {
			return env
		}
		n -= len(env) - MaxToolOutputBytes
	}
}

func compact(raw json.RawMessage) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return raw
	}
	return b.Bytes()
}

// denyUnoffered denies a call to a tool that is not offered, saying which
// of the three terms (allowed tools, toolset, permissions) it fails.
func (a *attempt) denyUnoffered(ctx context.Context, c *CallRecord) error {
	ref, err := graph.ParseActionRef(c.Name)
	if err != nil {
		for _, t := range a.def.AllowedTools {
			if r, err2 := graph.ParseActionRef(t); err2 == nil && functionName(r, map[string]bool{}) == c.Name {
				ref, err = r, nil
				break
			}
		}
	}
	if err != nil {
		return a.deny(ctx, c, ReasonUnknownTool, fmt.Sprintf("no tool is named %q", c.Name), nil)
	}
	c.Tool = ref.String()
	why, allowed := a.denials[c.Tool]
	if !allowed {
		why = "it is not in the agent's allowed tools"
	}
	var details map[string]any
	if pinned, ok := a.job.Actions[ref]; ok {
		if missing := a.grant.Tool(c.Tool, pinned.RequiredPermissions).Missing; len(missing) > 0 {
			details = map[string]any{"missing": missing}
		}
	}
	return a.deny(ctx, c, ReasonNotGranted, fmt.Sprintf("%s is not granted: %s", c.Tool, why), details)
}

func (a *attempt) deny(ctx context.Context, c *CallRecord, reason, msg string, details map[string]any) error {
	data := map[string]any{"tool": c.Tool, "name": c.Name, "ordinal": c.Ordinal, "reason": reason, "message": msg}
	for k, v := range details {
		data[k] = v
	}
	return a.settle(ctx, c, CallDenied, reason, msg, errorResult(reason, msg), a.event(execution.EventToolDenied, c.Ordinal, data))
}

func (a *attempt) fail(ctx context.Context, c *CallRecord, reason, msg string, details map[string]any) error {
	data := map[string]any{"tool": c.Tool, "ordinal": c.Ordinal, "reason": reason, "message": truncate(msg, 1000)}
	for k, v := range details {
		data[k] = v
	}
	return a.settle(ctx, c, CallFailed, reason, msg, errorResult(reason, truncate(msg, 1000)), a.event(execution.EventToolFailed, c.Ordinal, data))
}

// conflict fails closed: the call is recorded as failed and the node fails,
// non-retryable, without running anything.
func (a *attempt) conflict(ctx context.Context, c *CallRecord, cause error) error {
	msg := fmt.Sprintf("ledger key %q of %s is bound to another input; refusing to run it", c.LedgerKey, c.Tool)
	if err := a.fail(ctx, c, ReasonConflict, msg, map[string]any{"ledgerKey": c.LedgerKey}); err != nil {
		return err
	}
	return temporal.NewNonRetryableApplicationError(fmt.Sprintf("node %q: tool call %d: %s", a.job.NodeID, c.Ordinal, msg),
		execution.ErrIdempotencyConflict, cause)
}

// settle records a call's end, adds its tool message, and saves.
func (a *attempt) settle(ctx context.Context, c *CallRecord, status, reason, msg, content string, ev execution.EventDraft) error {
	c.Status, c.Reason, c.Message, c.Attempt = status, reason, truncate(msg, 1000), a.job.Attempt
	a.tr.Messages = append(a.tr.Messages, provider.Message{Role: provider.RoleTool, ToolCallID: c.CallID, Content: content})
	return a.save(ctx, nil, ev)
}

// event builds an event of this node and attempt with key
// <run>/<node>/<attempt>/<type>/<ordinal>.
func (a *attempt) event(typ string, ordinal int, data map[string]any) execution.EventDraft {
	raw, err := json.Marshal(data)
	if err != nil {
		raw = []byte(`{}`)
	}
	j := a.job
	return execution.EventDraft{
		Key:  fmt.Sprintf("%s/%s/%d/%s/%d", j.RunID, j.NodeID, j.Attempt, typ, ordinal),
		Type: typ, NodeID: j.NodeID, Attempt: j.Attempt, At: a.r.now().UTC(), Data: raw,
	}
}

// save stores the transcript with usage and the step's events (the
// outbox), then appends the events. It runs even while the attempt is being
// cancelled, so a settled step is not lost.
func (a *attempt) save(ctx context.Context, usage *store.Usage, events ...execution.EventDraft) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), saveTimeout)
	defer cancel()
	raw, err := json.Marshal(a.tr)
	if err != nil {
		return permanent(ErrAgentUnavailable, nil, "node %q: transcript cannot be encoded: %v", a.job.NodeID, err)
	}
	j := a.job
	err = a.r.store.SaveAgentTranscript(sctx, store.AgentTranscript{
		TenantID: j.TenantID, RunID: j.RunID, NodeID: j.NodeID, AgentKey: j.Agent.Key, AgentRevision: j.Agent.Revision,
		Attempt: j.Attempt, Dispatch: j.Dispatch, Turn: len(a.tr.Turns), Transcript: raw, LedgerKeys: a.tr.LedgerKeys(), Outbox: events,
	}, usage)
	switch code := failure.CodeOf(err); {
	case err == nil:
	case code == store.CodeStaleAttempt:
		return permanent(ErrStaleAttempt, nil, "node %q: %v", j.NodeID, err)
	case code != failure.CodeInternal:
		return permanent(ErrAgentUnavailable, nil, "node %q: transcript cannot be saved: %v", j.NodeID, err)
	default:
		return fmt.Errorf("agents: save transcript: %w", err)
	}
	if len(events) > 0 {
		if err := a.r.store.AppendEvents(sctx, j.TenantID, j.RunID, events, nil); err != nil {
			return fmt.Errorf("agents: append events: %w", err)
		}
	}
	return nil
}

// compile compiles a schema once per worker (by content).
func (r *Runtime) compile(raw json.RawMessage) (*jsonschema.Schema, error) {
	key := graph.SHA256Hex(raw)
	r.mu.Lock()
	s, ok := r.schemas[key]
	r.mu.Unlock()
	if ok {
		return s, nil
	}
	s, err := graph.CompileSchema(raw)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	if len(r.schemas) >= 1024 {
		r.schemas = map[string]*jsonschema.Schema{}
	}
	r.schemas[key] = s
	r.mu.Unlock()
	return s, nil
}
