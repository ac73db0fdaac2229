// Package publication turns a draft into a published revision: the
// Resolver loads the dependency snapshot (action contracts, agent and skill
// revisions, the variable registry's scopes) a document is validated and
// compiled against, and the Service dry-runs and publishes drafts with it.
// The API's authoring routes and the starter's simulated drafts share one
// Resolver, so a draft simulates exactly as it would publish. The action
// registry the worker runs lives in package catalog.
package publication

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
	"github.com/weftworks/weft/variables/graphcheck"
)

// AgentSource loads the agent revisions a document names. It is the seam for
// the agents store: until it is set, no agent resolves and every agent
// reference is reported MISSING_DEPENDENCY by validation.
type AgentSource interface {
	// AgentContracts returns the contracts of those refs that exist for the
	// tenant (archived ones included, marked Archived, so validation can
	// name the reason). Missing refs are simply absent from the result; an
	// error means the lookup itself failed.
	AgentContracts(ctx context.Context, tenantID string, refs []graph.AgentRef) ([]graph.AgentContract, error)
}

// SkillSource loads the tenant skill revisions agent revisions list
// (store.Store implements it). Without one, an agent listing skills is
// refused (MISSING_DEPENDENCY).
type SkillSource interface {
	// SkillContracts returns those refs that exist for the tenant,
	// archived ones marked Archived; missing refs are absent.
	SkillContracts(ctx context.Context, tenantID string, refs []graph.SkillRef) ([]graph.SkillContract, error)
}

// ActionSource lists the action contracts workers published to the catalog
// (store.Store implements it), so actions registered in Go beyond the
// built-ins resolve at publication.
type ActionSource interface {
	PublishedContracts(ctx context.Context) ([]graph.ActionContract, error)
}

// Resolver builds the dependency snapshot (a graph.Catalog) a document is
// validated and compiled against. graph performs no I/O, so everything a
// document references is loaded here first, in one place, scoped to the
// tenant. The zero value (and a nil *Resolver) resolves the built-in action
// contracts and no agents.
type Resolver struct {
	// Agents, when set, resolves agent revisions (store.Store). Nil
	// resolves no agent: every agent reference is MISSING_DEPENDENCY.
	Agents AgentSource
	// Skills, when set, resolves the tenant skill revisions the agents list
	// (store.Store). Nil resolves none.
	Skills SkillSource
	// Actions, when set, adds the published action contracts to the
	// built-in ones (a published contract replaces the built-in of the same
	// id@version; workers refuse to publish a different one). Nil resolves
	// the built-ins only.
	Actions ActionSource
	// Templates, when set, checks mapping templates against the variable
	// registry (UNKNOWN_VARIABLE) and contributes the scopes they need. Nil
	// until the variables registry offers a graph.TemplateChecker; without it
	// templates are checked for syntax and bindings only.
	Templates graph.TemplateChecker
	// Variables, when set, is the registry agent instructions resolve
	// against at run time: the scopes of the variables an agent's
	// instructions read become the agent contract's required permissions,
	// so they count as the agent node's (SPEC §6). Nil adds none.
	Variables *variables.Registry
	// Compiler caches checked gate expressions and compiled schemas across
	// validations (a saved draft is re-validated on every dry-run and
	// publish). Nil compiles from scratch every time.
	Compiler *graph.Compiler
	// HistoryBudget is the Temporal cluster's per-execution limits
	// (config: WEFT_HISTORY_*); nil is graph.DefaultHistoryBudget.
	HistoryBudget *graph.HistoryBudget
}

// Store is what the production resolver reads: the tenant's agents and the
// published action contracts (store.Store implements both).
type Store interface {
	AgentSource
	ActionSource
	SkillSource
}

// NewResolver is the production resolver: built-in and published actions,
// the tenant's agent and skill revisions, and mapping templates checked
// against vars (UNKNOWN_VARIABLE, and the scopes templates need). Both are
// required. The API and the starter share the one the app wires, so a
// draft simulates exactly as it would publish.
func NewResolver(st Store, vars *variables.Registry) (*Resolver, error) {
	if s, ok := st.(*store.Store); st == nil || (ok && s == nil) {
		return nil, errors.New("publication: NewResolver needs a Store (agents, skills and published actions)")
	}
	if vars == nil {
		return nil, errors.New("publication: NewResolver needs the variable registry")
	}
	return &Resolver{Agents: st, Actions: st, Skills: st, Compiler: graph.NewCompiler(graph.CompilerConfig{}),
		Templates: graphcheck.New(vars), Variables: vars}, nil
}

// ForScopes returns the resolver a principal holding scopes publishes
// with: its template checker also refuses, as UNKNOWN_VARIABLE, a
// registered variable whose scope the principal does not hold (a forbidden
// variable, SPEC §6), so nobody embeds a variable they could not read
// themselves. Everything else, the Compiler included, is shared. A resolver
// without a registry-backed checker is returned as it is.
func (r *Resolver) ForScopes(scopes []string) *Resolver {
	if r == nil {
		return nil
	}
	c, ok := r.Templates.(*graphcheck.Checker)
	if !ok {
		return r
	}
	scoped := *r
	scoped.Templates = c.ForScopes(scopes)
	return &scoped
}

// Options returns the validation hooks every validation, dry-run and
// compilation of a document must use, so the three always agree.
func (r *Resolver) Options() graph.Options {
	if r == nil {
		return graph.Options{}
	}
	return graph.Options{Templates: r.Templates, Compiler: r.Compiler, HistoryBudget: r.HistoryBudget}
}

// Catalog returns the snapshot doc is validated against for tenantID: the
// built-in action contracts (plus the published ones when an ActionSource
// is set), the agent revisions doc references that the AgentSource knows,
// and the skill revisions those agents list that the SkillSource knows.
func (r *Resolver) Catalog(ctx context.Context, tenantID string, doc *graph.Document) (graph.Catalog, error) {
	actions := catalog.BuiltinContracts()
	if r != nil && r.Actions != nil {
		published, err := r.Actions.PublishedContracts(ctx)
		if err != nil {
			return nil, fmt.Errorf("publication: resolve actions: %w", err)
		}
		actions = append(actions, published...)
	}
	var agents []graph.AgentContract
	if r != nil && r.Agents != nil {
		_, refs := graph.References(doc)
		if len(refs) > 0 {
			var err error
			agents, err = r.Agents.AgentContracts(ctx, tenantID, refs)
			if err != nil {
				return nil, fmt.Errorf("publication: resolve agents: %w", err)
			}
			r.addInstructionScopes(agents)
		}
	}
	cat := graph.NewStaticCatalog(actions, agents)
	if refs := graph.SkillRefs(agents); len(refs) > 0 && r.Skills != nil {
		skills, err := r.Skills.SkillContracts(ctx, tenantID, refs)
		if err != nil {
			return nil, fmt.Errorf("publication: resolve skills: %w", err)
		}
		cat.WithSkills(skills)
	}
	return cat, nil
}

// addInstructionScopes adds to each agent contract the scopes of the
// registered variables its instructions read. The harness resolves
// instructions with the agent's own key bound as agentId, so agent.name
// needs no binding there (and its scope, agents.read, still counts).
func (r *Resolver) addInstructionScopes(agents []graph.AgentContract) {
	if r.Variables == nil {
		return
	}
	defs := r.Variables.Definitions()
	bindings := map[string]string{variables.BindingAgentID: ""}
	for i := range agents {
		c := &agents[i]
		for _, s := range variables.Scopes(c.Instructions, bindings, defs) {
			if !slices.Contains(c.RequiredPermissions, s) {
				c.RequiredPermissions = append(c.RequiredPermissions, s)
			}
		}
		slices.Sort(c.RequiredPermissions)
	}
}

// Compile validates and compiles doc against the tenant's dependency
// snapshot with the resolver's options: what publication and a simulated
// draft both do, so they can never disagree. Issues mean doc is not
// publishable; an error means the snapshot could not be loaded.
func (r *Resolver) Compile(ctx context.Context, tenantID string, doc *graph.Document) (*graph.Compiled, []graph.Issue, error) {
	cat, err := r.Catalog(ctx, tenantID, doc)
	if err != nil {
		return nil, nil, err
	}
	compiled, issues := graph.CompileWith(doc, cat, r.Options())
	return compiled, issues, nil
}

// DryRun reports what publication would decide for doc, storing nothing.
func (r *Resolver) DryRun(ctx context.Context, tenantID string, doc *graph.Document) (graph.DryRunResult, error) {
	cat, err := r.Catalog(ctx, tenantID, doc)
	if err != nil {
		return graph.DryRunResult{}, err
	}
	return graph.DryRunWith(doc, cat, r.Options()), nil
}
