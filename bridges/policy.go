package bridges

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/authz"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// CodeInvalidToolPolicy refuses a tool policy naming an action that is not
// in the catalog or that runs never execute (external, destructive);
// details.issues lists {index, tool, code, message}.
const CodeInvalidToolPolicy = "INVALID_TOOL_POLICY"

// A schedule's or webhook's tool policy is the explicit, revocable list of
// tools (actionId@version) its runs' agents may be offered: a service
// actor is tool-less without one, so a new bridge offers none unless its
// creator lists them. Every tool is checked against the creator's scopes
// (the snapshot minus the creator's revocations) when the policy is set
// and at every firing or delivery; at run time every call is checked again
// against the policy as it is then (package authz), so narrowing it
// reaches runs under way at their next tool call.

// ToolPolicyView is a bridge's tool policy as the API shows it.
type ToolPolicyView struct {
	ToolPolicy          []string  `json:"toolPolicy"`
	ToolPolicyUpdatedBy string    `json:"toolPolicyUpdatedBy"`
	ToolPolicyUpdatedAt time.Time `json:"toolPolicyUpdatedAt"`
}

// contracts is the catalog a tool policy is checked against: the built-in
// contracts and those workers published (as publication resolves them), by
// actionId@version.
func (e *Enqueuer) contracts(ctx context.Context) (map[string]graph.ActionContract, error) {
	out := map[string]graph.ActionContract{}
	for _, c := range catalog.BuiltinContracts() {
		out[graph.ActionRef{ID: c.ID, Version: c.Version}.String()] = c
	}
	published, err := e.store.PublishedContracts(ctx)
	if err != nil {
		return nil, fmt.Errorf("bridges: read the action catalog: %w", err)
	}
	for _, c := range published {
		out[graph.ActionRef{ID: c.ID, Version: c.Version}.String()] = c
	}
	return out, nil
}

// checkPolicy validates a requested tool policy: well-formed (400
// INVALID_REQUEST), at most authz.MaxTools, each tool in the catalog and
// runnable (422 INVALID_TOOL_POLICY). It returns the policy normalized
// (sorted, no duplicates; nil becomes empty) with each tool's contract.
func (e *Enqueuer) checkPolicy(ctx context.Context, requested []string) ([]string, map[string]graph.ActionContract, error) {
	policy, err := authz.ParseTools("toolPolicy", requested)
	if err != nil {
		return nil, nil, err
	}
	if policy == nil {
		policy = []string{}
	}
	known, err := e.contracts(ctx)
	if err != nil {
		return nil, nil, err
	}
	var issues []map[string]any
	for _, t := range policy {
		c, ok := known[t]
		switch {
		case !ok:
			issues = append(issues, map[string]any{"index": slices.Index(requested, t), "tool": t, "code": graph.CodeMissingDependency,
				"message": fmt.Sprintf("%s is not in the action catalog (GET /v1/actions)", t)})
		case c.Risk != graph.RiskRead && c.Risk != graph.RiskWorkspaceWrite:
			issues = append(issues, map[string]any{"index": slices.Index(requested, t), "tool": t, "code": graph.CodeUnsupportedActionRisk,
				"message": fmt.Sprintf("%s has risk %q, which runs never execute", t, c.Risk)})
		}
	}
	if len(issues) > 0 {
		return nil, nil, failure.New(CodeInvalidToolPolicy, "the tool policy names %d tool(s) runs cannot be offered", len(issues)).
			WithDetails(map[string]any{"issues": issues})
	}
	return policy, known, nil
}

// policyMissing returns, per tool of tools, the required permissions perms
// lacks (tools whose contract is unknown are skipped: never offered), and
// the union of them, sorted.
func policyMissing(tools []string, known map[string]graph.ActionContract, perms []string) (map[string][]string, []string) {
	byTool := map[string][]string{}
	var all []string
	for _, t := range tools {
		c, ok := known[t]
		if !ok {
			continue
		}
		if m := auth.Missing(perms, c.RequiredPermissions); len(m) > 0 {
			byTool[t] = m
			all = append(all, m...)
		}
	}
	all = auth.Missing(nil, all) // sorted, without duplicates
	return byTool, all
}

// effectiveScopes is sub's snapshot minus what is revoked from sub now.
func (e *Enqueuer) effectiveScopes(ctx context.Context, tenantID, sub string, snapshot []string) ([]string, error) {
	revoked, err := e.store.RevokedScopes(ctx, tenantID, sub)
	if err != nil {
		return nil, err
	}
	return authz.Effective(snapshot, revoked), nil
}

// missingScopeError is the 403 for a policy whose tools need scopes that
// whose (the creator, you) does not hold.
func missingScopeError(whose string, byTool map[string][]string, missing []string) error {
	tools := slices.Sorted(maps.Keys(byTool))
	return failure.New(failure.CodeMissingScope, "the tool policy lists %s, which need scopes %s does not hold: %s",
		strings.Join(tools, ", "), whose, strings.Join(missing, ", ")).
		WithDetails(map[string]any{"missing": missing, "tools": byTool})
}

// creatorPolicy checks the policy a creator sets on a new bridge against
// the creator's scopes now.
func (e *Enqueuer) creatorPolicy(ctx context.Context, creator auth.Principal, requested []string) ([]string, error) {
	policy, known, err := e.checkPolicy(ctx, requested)
	if err != nil {
		return nil, err
	}
	perms, err := e.effectiveScopes(ctx, creator.Tenant, creator.Sub, creator.Scopes)
	if err != nil {
		return nil, err
	}
	if byTool, missing := policyMissing(policy, known, perms); len(missing) > 0 {
		return nil, missingScopeError("you", byTool, missing)
	}
	return policy, nil
}

// replacementPolicy checks a policy replacing current on a bridge created
// by creatorSub with snapshot. Narrowing needs nothing more than the route's
// scope; every tool added must be held by the creator (snapshot minus
// revocations: the runs act as the creator) and by the caller (nobody grants
// what they do not hold).
func (e *Enqueuer) replacementPolicy(ctx context.Context, caller auth.Principal, creatorSub string, snapshot, current, requested []string) ([]string, error) {
	policy, known, err := e.checkPolicy(ctx, requested)
	if err != nil {
		return nil, err
	}
	var added []string
	for _, t := range policy {
		if !slices.Contains(current, t) {
			added = append(added, t)
		}
	}
	if len(added) == 0 {
		return policy, nil
	}
	creatorPerms, err := e.effectiveScopes(ctx, caller.Tenant, creatorSub, snapshot)
	if err != nil {
		return nil, err
	}
	if byTool, missing := policyMissing(added, known, creatorPerms); len(missing) > 0 {
		return nil, missingScopeError("its creator "+creatorSub, byTool, missing)
	}
	callerPerms, err := e.effectiveScopes(ctx, caller.Tenant, caller.Sub, caller.Scopes)
	if err != nil {
		return nil, err
	}
	if byTool, missing := policyMissing(added, known, callerPerms); len(missing) > 0 {
		return nil, missingScopeError("you", byTool, missing)
	}
	return policy, nil
}

// firingPolicyError is the refusal of a firing or delivery whose tool
// policy lists tools the creator's effective scopes no longer cover: the
// policy is checked at every firing, so a revocation from the creator
// stops the bridge until someone narrows its policy (or the revocation is
// removed).
func (e *Enqueuer) firingPolicyError(ctx context.Context, a serviceActor, perms []string) error {
	if len(a.toolPolicy) == 0 {
		return nil
	}
	known, err := e.contracts(ctx)
	if err != nil {
		return err
	}
	byTool, missing := policyMissing(a.toolPolicy, known, perms)
	if len(missing) == 0 {
		return nil
	}
	tools := slices.Sorted(maps.Keys(byTool))
	return failure.New(failure.CodePermissionDenied,
		"the %s's tool policy lists %s, which need %s: its creator %s no longer holds them; narrow the policy (PUT .../tool-policy) or remove the revocation",
		a.kind, strings.Join(tools, ", "), strings.Join(missing, ", "), a.createdBy).
		WithDetails(map[string]any{"missing": missing, "tools": byTool})
}

func scheduleToolPolicy(r store.Schedule) ToolPolicyView {
	return ToolPolicyView{ToolPolicy: r.ToolPolicy, ToolPolicyUpdatedBy: r.ToolPolicyUpdatedBy, ToolPolicyUpdatedAt: r.ToolPolicyUpdatedAt}
}

func webhookToolPolicy(w store.Webhook) ToolPolicyView {
	return ToolPolicyView{ToolPolicy: w.ToolPolicy, ToolPolicyUpdatedBy: w.ToolPolicyUpdatedBy, ToolPolicyUpdatedAt: w.ToolPolicyUpdatedAt}
}
