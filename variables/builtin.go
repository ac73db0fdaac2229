package variables

import (
	"context"
	"errors"
	"fmt"
)

// Built-in variable keys, binding names and scopes (SPEC §6).
const (
	KeyTenantName      = "context.tenantName"
	KeyToday           = "context.today"
	KeyUserDisplayName = "context.user.displayName"
	KeyUserEmail       = "context.user.email"
	KeyRunID           = "run.id"
	KeyWorkflowKey     = "workflow.key"
	KeyAgentName       = "agent.name"

	// BindingAgentID is the binding agent.name needs: the agent's key.
	BindingAgentID = "agentId"
	// ScopeAgentsRead is the scope agent.name needs.
	ScopeAgentsRead = "agents.read"
)

// ContextSource provides the scope-less request-context variables:
// context.tenantName (Request.TenantName, or TenantID when empty),
// context.today (Request.Today as YYYY-MM-DD; a zero Today is a source
// failure), context.user.displayName (Actor.Name, or Actor.Sub when empty) and
// context.user.email (Actor.Email, possibly empty).
func ContextSource() Source {
	return NewSource([]Definition{
		{Key: KeyTenantName, Label: "Tenant name", Kind: KindText, Sample: "Acme Corp",
			Description: "Display name of the tenant the request runs in."},
		{Key: KeyToday, Label: "Today", Kind: KindDate, Sample: "2026-01-31",
			Description: "The run's date (YYYY-MM-DD), taken from the run's start time."},
		{Key: KeyUserDisplayName, Label: "User display name", Kind: KindText, Sample: "Ada Lovelace",
			Description: "Display name of the principal the run acts for."},
		{Key: KeyUserEmail, Label: "User e-mail", Kind: KindText, Sample: "ada@example.com",
			Description: "E-mail address of the principal the run acts for; empty when unknown."},
	}, resolveContext)
}

func resolveContext(_ context.Context, req Request, keys []string) (map[string]string, error) {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		switch k {
		case KeyTenantName:
			out[k] = req.TenantName
			if out[k] == "" {
				out[k] = req.TenantID
			}
		case KeyToday:
			if req.Today.IsZero() {
				return nil, errors.New("variables: request has no Today")
			}
			out[k] = req.Today.Format("2006-01-02")
		case KeyUserDisplayName:
			out[k] = req.Actor.Name
			if out[k] == "" {
				out[k] = req.Actor.Sub
			}
		case KeyUserEmail:
			out[k] = req.Actor.Email
		}
	}
	return out, nil
}

// RunSource provides the scope-less run variables run.id (Request.RunID) and
// workflow.key (Request.WorkflowKey). Outside a run (empty field) the variable
// has no record and resolution is refused with RECORD_NOT_FOUND.
func RunSource() Source {
	return NewSource([]Definition{
		{Key: KeyRunID, Label: "Run id", Kind: KindIdentifier, Sample: "run_01J0000000000000000000000",
			Description: "Id of the current run."},
		{Key: KeyWorkflowKey, Label: "Workflow key", Kind: KindIdentifier, Sample: "invoice-intake",
			Description: "Key of the workflow being run."},
	}, resolveRun)
}

func resolveRun(_ context.Context, req Request, keys []string) (map[string]string, error) {
	out := make(map[string]string, len(keys))
	for _, k := range keys {
		var v string
		switch k {
		case KeyRunID:
			v = req.RunID
		case KeyWorkflowKey:
			v = req.WorkflowKey
		}
		if v == "" {
			return nil, fmt.Errorf("variables: %s outside a run: %w", k, ErrRecordNotFound)
		}
		out[k] = v
	}
	return out, nil
}

// AgentLookup reads an agent's display name for a tenant. It returns
// ErrRecordNotFound (possibly wrapped) when no agent with agentKey exists in
// tenantID, including when the key belongs to another tenant's agent.
type AgentLookup interface {
	AgentName(ctx context.Context, tenantID, agentKey string) (string, error)
}

// AgentNameSource provides agent.name, the bound, scoped example: it needs the
// binding "agentId" (the agent key) and the scope "agents.read", and asks
// lookup under the request's trusted tenant only.
func AgentNameSource(lookup AgentLookup) Source {
	return NewSource([]Definition{
		{Key: KeyAgentName, Label: "Agent name", Kind: KindText, Scope: ScopeAgentsRead,
			RequiredBindings: []string{BindingAgentID}, Sample: "Support triage",
			Description: "Name of the agent bound by agentId, in the request's tenant."},
	}, func(ctx context.Context, req Request, _ []string) (map[string]string, error) {
		if req.TenantID == "" {
			return nil, errors.New("variables: request has no tenant")
		}
		name, err := lookup.AgentName(ctx, req.TenantID, req.Bindings[BindingAgentID])
		if err != nil {
			return nil, err
		}
		return map[string]string{KeyAgentName: name}, nil
	})
}

// Builtin returns the production registry: ContextSource, RunSource and
// AgentNameSource(lookup). The same registry must back graph validation
// (publication, dry-run), run-time resolution in activities and the
// /v1/variables routes, so a template accepted at publication resolves the
// same keys at run time.
func Builtin(lookup AgentLookup) (*Registry, error) {
	if lookup == nil {
		return nil, errors.New("variables: Builtin needs an AgentLookup (use NoAgents until agents are stored)")
	}
	return NewRegistry(ContextSource(), RunSource(), AgentNameSource(lookup))
}

// NoAgents is the AgentLookup to use while weft stores no agents: it answers
// every lookup with ErrRecordNotFound, because no agent exists in any tenant,
// so `{{ agent.name }}` is refused with RECORD_NOT_FOUND instead of rendering
// anything made up. The agents issue replaces it with the store-backed lookup
// (an AgentName reading the tenant's agent by key).
type NoAgents struct{}

// AgentName reports that the agent does not exist.
func (NoAgents) AgentName(_ context.Context, _ string, agentKey string) (string, error) {
	return "", fmt.Errorf("variables: agent %q: no agents are stored yet: %w", agentKey, ErrRecordNotFound)
}
