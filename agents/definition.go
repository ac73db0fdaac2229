// Package agents is weft's agent domain: the content of an agent revision
// (Definition) and its validation, and the tool harness that runs an agent
// node — model turns through a provider (package agents/provider), tool
// calls through the action catalog under the run's permissions, a ledger
// for mutating calls, and a transcript saved after every step so a later
// attempt resumes where the previous one stopped.
package agents

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/variables"
)

// Limits and defaults of a definition.
const (
	DefaultMaxTurns  = 10
	MaxMaxTurns      = 50
	DefaultTimeoutMs = 60_000
	// MinTimeoutMs and MaxTimeoutMs bound timeoutMs (SPEC §2 node timeouts).
	MinTimeoutMs = 250
	MaxTimeoutMs = 600_000
	// MaxAllowedTools bounds allowedTools.
	MaxAllowedTools = 64
	// MaxSimToolCalls bounds sim.toolCalls.
	MaxSimToolCalls = 32
	// MaxModelChars bounds model.
	MaxModelChars = 200
	// MaxOutputTokensLimit bounds maxOutputTokens and sim.usage token counts.
	MaxOutputTokensLimit = 100_000_000
	// MaxDefinitionBytes bounds a definition's JSON.
	MaxDefinitionBytes = 512 << 10
)

// Issue codes of a definition (details.issues of INVALID_AGENT).
const (
	// CodeInvalidAgent is the error code refusing a definition with issues (422).
	CodeInvalidAgent = "INVALID_AGENT"

	IssueInvalidField    = "INVALID_FIELD"
	IssueLimitExceeded   = graph.CodeLimitExceeded
	IssueInvalidSchema   = graph.CodeInvalidSchema
	IssueUnknownVariable = graph.CodeUnknownVariable
	IssueInvalidTool     = "INVALID_TOOL"
	// IssueUnknownTool is an allowed tool that is neither a built-in nor a
	// published action: the code publication would refuse it with.
	IssueUnknownTool      = graph.CodeMissingDependency
	IssueUnsupportedRisk  = graph.CodeUnsupportedActionRisk
	IssueInvalidSimScript = "INVALID_SIM_SCRIPT"
	// IssueUnknownSkill is a listed skill revision that is not stored or is
	// archived: the code publication would refuse it with.
	IssueUnknownSkill = graph.CodeMissingDependency
)

// Definition is the content of one immutable agent revision. Instructions
// are a template (SPEC §6): the stored revision keeps it raw; it is resolved
// when the agent runs, with the run's context, and only the run's
// transcript holds the resolved text.
type Definition struct {
	Instructions string `json:"instructions"`
	// Provider is "sim" (default) or "openai".
	Provider string `json:"provider"`
	// Model is the model name; for openai "" means the worker's
	// WEFT_OPENAI_MODEL. The sim provider defaults it to "sim".
	Model string `json:"model"`
	// OutputSchema is the JSON Schema the final answer must match ({} accepts
	// any JSON value). On an agent-decision node the answer must also be an
	// object whose "outcome" is "pass" or "fail" (the decision contract).
	OutputSchema json.RawMessage `json:"outputSchema"`
	// AllowedTools are actionId@version, sorted and distinct.
	AllowedTools []string `json:"allowedTools"`
	MaxTurns     int      `json:"maxTurns"`
	// TimeoutMs bounds one attempt of the agent (model turns and tool calls
	// together); the node timeout bounds it too.
	TimeoutMs int `json:"timeoutMs"`
	// MaxOutputTokens caps the output tokens of each model call (0: no
	// cap of its own). The openai provider sends it as the call's limit;
	// under a run budget it also bounds what each call reserves, so
	// parallel agent nodes can share the budget.
	MaxOutputTokens int64 `json:"maxOutputTokens,omitempty"`
	// Sim is what the sim provider plays.
	Sim *provider.SimScript `json:"sim,omitempty"`
	// Skills are tenant skill revisions whose texts are appended to the
	// instructions, in this order (see the harness for the whole order).
	// Publication pins each one's content hash; a new skill revision never
	// changes a published workflow. Absent when none, so definitions saved
	// before skills existed hash as they did.
	Skills []SkillRef `json:"skills,omitempty"`
}

// DecodeDefinition decodes a definition strictly: unknown fields, wrong
// types and trailing data are errors (the API answers 400 INVALID_REQUEST).
func DecodeDefinition(raw json.RawMessage) (Definition, error) {
	var d Definition
	if len(raw) > MaxDefinitionBytes {
		return d, fmt.Errorf("definition is %d bytes; the limit is %d", len(raw), MaxDefinitionBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return Definition{}, fmt.Errorf("definition: %w", err)
	}
	if dec.More() {
		return Definition{}, fmt.Errorf("definition: trailing data after the object")
	}
	return d, nil
}

// Normalize fills defaults (provider sim, model "sim" for sim, outputSchema
// {}, maxTurns, timeoutMs) and sorts allowedTools, so equal content hashes
// equally. It does not validate.
func (d Definition) Normalize() Definition {
	d.Provider = strings.TrimSpace(d.Provider)
	if d.Provider == "" {
		d.Provider = provider.NameSim
	}
	d.Model = strings.TrimSpace(d.Model)
	if d.Model == "" && d.Provider == provider.NameSim {
		d.Model = provider.NameSim
	}
	if len(bytes.TrimSpace(d.OutputSchema)) == 0 || string(bytes.TrimSpace(d.OutputSchema)) == "null" {
		d.OutputSchema = json.RawMessage(`{}`)
	}
	if d.MaxTurns == 0 {
		d.MaxTurns = DefaultMaxTurns
	}
	if d.TimeoutMs == 0 {
		d.TimeoutMs = DefaultTimeoutMs
	}
	tools := make([]string, 0, len(d.AllowedTools))
	for _, t := range d.AllowedTools {
		tools = append(tools, strings.TrimSpace(t))
	}
	slices.Sort(tools)
	d.AllowedTools = slices.Compact(tools)
	if d.Sim != nil && len(d.Sim.Output) == 0 && d.Sim.Outcome == "" && len(d.Sim.ToolCalls) == 0 && d.Sim.Usage == nil {
		d.Sim = nil
	}
	if len(d.Skills) == 0 {
		d.Skills = nil
	} else {
		skills := make([]SkillRef, len(d.Skills))
		for i, sk := range d.Skills {
			skills[i] = SkillRef{Key: strings.TrimSpace(sk.Key), Revision: sk.Revision}
		}
		d.Skills = skills
	}
	return d
}

// Hash is hex sha256 of the canonical JSON (RFC 8785) of the normalized
// definition: the revision's content hash, pinned by publication.
func (d Definition) Hash() (string, error) {
	b, err := graph.Canonical(d.Normalize())
	if err != nil {
		return "", err
	}
	return graph.SHA256Hex(b), nil
}

// ValidateOptions are what validation consults beyond the definition.
type ValidateOptions struct {
	// Variables are the definitions instructions may use (nil: any key is
	// accepted). The binding agentId is always supplied: it is the agent's key.
	Variables []variables.Definition
	// Action, when set, looks a tool's contract up (the built-in and
	// published actions) so a tool publication would refuse is refused at
	// once: an unknown one (MISSING_DEPENDENCY) or one no run could call
	// (external, destructive: UNSUPPORTED_ACTION_RISK). Nil checks the
	// tools' syntax only.
	Action func(ref graph.ActionRef) (graph.ActionContract, bool)
	// Skill, when set, looks a listed skill revision up in the tenant, so
	// one publication would refuse (missing or archived:
	// MISSING_DEPENDENCY) is refused at once. Nil checks the references'
	// syntax only.
	Skill func(ref SkillRef) (graph.SkillContract, bool)
}

var modelPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$`)

// Validate returns every issue of the normalized definition d, with JSON
// pointer paths below prefix (e.g. "/definition"). An empty result means
// the definition can be stored.
func Validate(d Definition, prefix string, opts ValidateOptions) []graph.Issue {
	issues := []graph.Issue{}
	add := func(code, path, format string, args ...any) {
		issues = append(issues, graph.Issue{Code: code, Path: prefix + path, Message: fmt.Sprintf(format, args...)})
	}
	// Instructions: a non-empty template of known variables.
	switch n := utf8.RuneCountInString(d.Instructions); {
	case strings.TrimSpace(d.Instructions) == "":
		add(IssueInvalidField, "/instructions", "instructions are required")
	case n > graph.DefaultLimits.MaxTemplateChars:
		add(IssueLimitExceeded, "/instructions", "instructions have %d characters; the limit is %d", n, graph.DefaultLimits.MaxTemplateChars)
	case opts.Variables != nil:
		if unknown := variables.Check(d.Instructions, map[string]string{variables.BindingAgentID: ""}, opts.Variables); len(unknown) > 0 {
			add(IssueUnknownVariable, "/instructions", "instructions use unknown variables: %s", strings.Join(unknown, ", "))
		}
	}
	switch d.Provider {
	case provider.NameSim, provider.NameOpenAI:
	default:
		add(IssueInvalidField, "/provider", "provider %q is not %q or %q", d.Provider, provider.NameSim, provider.NameOpenAI)
	}
	if d.Model != "" && (len(d.Model) > MaxModelChars || !modelPattern.MatchString(d.Model)) {
		add(IssueInvalidField, "/model", "model must be a model name of at most %d characters", MaxModelChars)
	}
	outputOK := true
	if !isJSONObject(d.OutputSchema) {
		add(IssueInvalidSchema, "/outputSchema", "outputSchema must be a JSON Schema object")
		outputOK = false
	} else if _, err := graph.CompileSchema(d.OutputSchema); err != nil {
		add(IssueInvalidSchema, "/outputSchema", "outputSchema does not compile: %v", err)
		outputOK = false
	}
	if d.MaxTurns < 1 || d.MaxTurns > MaxMaxTurns {
		add(IssueLimitExceeded, "/maxTurns", "maxTurns %d is outside 1–%d", d.MaxTurns, MaxMaxTurns)
	}
	if d.TimeoutMs < MinTimeoutMs || d.TimeoutMs > MaxTimeoutMs {
		add(IssueLimitExceeded, "/timeoutMs", "timeoutMs %d is outside %d–%d", d.TimeoutMs, MinTimeoutMs, MaxTimeoutMs)
	}
	if d.MaxOutputTokens < 0 || d.MaxOutputTokens > MaxOutputTokensLimit {
		add(IssueLimitExceeded, "/maxOutputTokens", "maxOutputTokens %d is outside 1–%d (0 or absent: no cap)", d.MaxOutputTokens, MaxOutputTokensLimit)
	}
	if len(d.AllowedTools) > MaxAllowedTools {
		add(IssueLimitExceeded, "/allowedTools", "%d allowed tools; the limit is %d", len(d.AllowedTools), MaxAllowedTools)
	}
	for i, t := range d.AllowedTools {
		path := fmt.Sprintf("/allowedTools/%d", i)
		ref, err := graph.ParseActionRef(t)
		if err != nil {
			add(IssueInvalidTool, path, "%v", err)
			continue
		}
		if opts.Action == nil {
			continue
		}
		c, ok := opts.Action(ref)
		switch {
		case !ok:
			add(IssueUnknownTool, path, "tool %s is not a built-in or published action (see GET /v1/actions)", ref)
		case c.Risk != graph.RiskRead && c.Risk != graph.RiskWorkspaceWrite:
			add(IssueUnsupportedRisk, path, "tool %s has risk %q; agents may only use read and workspace-write actions", ref, c.Risk)
		}
	}
	if d.Sim != nil {
		validateSim(d, outputOK, add)
	}
	validateSkills(d, opts, add)
	return issues
}

// skillKeyPattern is the syntax of skill keys (the agent and workflow key syntax).
var skillKeyPattern = regexp.MustCompile(`^[a-z][a-z0-9-]{0,62}$`)

// validateSkills checks the skills an agent revision lists: at most
// MaxAgentSkills, each key@revision well-formed and listed once, and (with
// opts.Skill) stored and not archived.
func validateSkills(d Definition, opts ValidateOptions, add func(code, path, format string, args ...any)) {
	if len(d.Skills) > MaxAgentSkills {
		add(IssueLimitExceeded, "/skills", "%d skills; the limit is %d", len(d.Skills), MaxAgentSkills)
	}
	seen := map[string]bool{}
	for i, ref := range d.Skills {
		path := fmt.Sprintf("/skills/%d", i)
		switch {
		case !skillKeyPattern.MatchString(ref.Key):
			add(IssueInvalidField, path+"/key", "skill key %q must match %s", ref.Key, skillKeyPattern)
			continue
		case ref.Revision < 1:
			add(IssueInvalidField, path+"/revision", "skill revision must be a positive integer")
			continue
		case seen[ref.Key]:
			add(IssueInvalidField, path+"/key", "skill %q is listed twice", ref.Key)
			continue
		}
		seen[ref.Key] = true
		if opts.Skill == nil {
			continue
		}
		c, ok := opts.Skill(ref)
		switch {
		case !ok:
			add(IssueUnknownSkill, path, "skill %s is not stored (see GET /v1/skills/%s)", ref, ref.Key)
		case c.Archived:
			add(IssueUnknownSkill, path, "skill %s is archived", ref)
		}
	}
}

func validateSim(d Definition, outputOK bool, add func(code, path, format string, args ...any)) {
	s := d.Sim
	switch s.Outcome {
	case "", provider.OutcomePass, provider.OutcomeFail:
	default:
		add(IssueInvalidSimScript, "/sim/outcome", "sim.outcome must be %q or %q", provider.OutcomePass, provider.OutcomeFail)
	}
	if len(s.Output) > 0 {
		if !json.Valid(s.Output) {
			add(IssueInvalidSimScript, "/sim/output", "sim.output is not JSON")
		} else if outputOK {
			if schema, err := graph.CompileSchema(d.OutputSchema); err == nil {
				if err := graph.ValidateValue(schema, s.Output); err != nil {
					add(IssueInvalidSimScript, "/sim/output", "sim.output does not match outputSchema: %s", firstLine(err.Error()))
				}
			}
		}
	}
	if u := s.Usage; u != nil {
		if u.InputTokens < 0 || u.InputTokens > MaxOutputTokensLimit {
			add(IssueInvalidSimScript, "/sim/usage/inputTokens", "sim.usage.inputTokens must be from 0 to %d", MaxOutputTokensLimit)
		}
		if u.OutputTokens < 1 || u.OutputTokens > MaxOutputTokensLimit {
			add(IssueInvalidSimScript, "/sim/usage/outputTokens", "sim.usage.outputTokens must be from 1 to %d", MaxOutputTokensLimit)
		}
		if u.CostUSD < 0 || u.CostUSD > 1000 || u.CostUSD != u.CostUSD {
			add(IssueInvalidSimScript, "/sim/usage/costUsd", "sim.usage.costUsd must be from 0 to 1000")
		}
	}
	if len(s.ToolCalls) > MaxSimToolCalls {
		add(IssueLimitExceeded, "/sim/toolCalls", "%d scripted tool calls; the limit is %d", len(s.ToolCalls), MaxSimToolCalls)
	}
	for i, c := range s.ToolCalls {
		path := fmt.Sprintf("/sim/toolCalls/%d", i)
		if _, err := graph.ParseActionRef(c.Tool); err != nil {
			add(IssueInvalidSimScript, path+"/tool", "%v", err)
		}
		if len(c.Input) > 0 && !isJSONObject(c.Input) {
			add(IssueInvalidSimScript, path+"/input", "a tool call input is a JSON object")
		}
	}
}

func isJSONObject(raw json.RawMessage) bool {
	raw = bytes.TrimSpace(raw)
	return len(raw) > 0 && raw[0] == '{' && json.Valid(raw)
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return strings.TrimSpace(s[:i]) + " …"
	}
	return s
}

// decisionSchema is the decision contract of an agent-decision node.
const decisionSchema = `{"type":"object","required":["outcome"],"properties":{"outcome":{"type":"string","enum":["pass","fail"]}}}`

// EffectiveOutputSchema is the schema a node's final answer must match: the
// revision's outputSchema, combined with the decision contract for an
// agent-decision node (an object outputSchema gains a required "outcome"
// property; any other is replaced by the decision contract, and the
// revision's schema is still checked separately by the harness).
func EffectiveOutputSchema(outputSchema json.RawMessage, decision bool) json.RawMessage {
	if !decision {
		return outputSchema
	}
	var s map[string]any
	dec := json.NewDecoder(bytes.NewReader(outputSchema))
	dec.UseNumber()
	if dec.Decode(&s) != nil || s == nil {
		return json.RawMessage(decisionSchema)
	}
	if t, ok := s["type"]; ok && t != "object" {
		return json.RawMessage(decisionSchema)
	}
	s["type"] = "object"
	props, _ := s["properties"].(map[string]any)
	if props == nil {
		props = map[string]any{}
	}
	props["outcome"] = map[string]any{"type": "string", "enum": []any{provider.OutcomePass, provider.OutcomeFail}}
	s["properties"] = props
	req, _ := s["required"].([]any)
	if !slices.Contains(req, any("outcome")) {
		req = append(req, "outcome")
	}
	s["required"] = req
	b, err := json.Marshal(s)
	if err != nil {
		return json.RawMessage(decisionSchema)
	}
	return b
}
