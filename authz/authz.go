// Package authz decides what a run may do at the moment it acts (SPEC §5,
// §7, §8; issue 12). A run carries a permission snapshot taken at enqueue;
// a stored snapshot is never future authority, so before every tool call and
// every action attempt the run may only use:
//
//   - its snapshot minus the scopes revoked, now, from its acting principal
//     (a user's own sub; for a schedule's or webhook's service actor, the
//     user who configured it) — Effective;
//   - for an agent's tools, additionally: the run's toolGrants when the
//     enqueue gave them, and for a service actor its schedule's or webhook's
//     tool policy, both as it was when the run started and as it is now (a
//     service actor is tool-less without a policy; a deleted bridge has
//     none).
//
// The terms are read from PostgreSQL for every decision (store.RunAuthority,
// store.RevokedScopes: one indexed query each), so a revocation or a
// narrowed policy takes effect at the next call; nothing is cached.
package authz

import (
	"fmt"
	"slices"
	"strings"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

// MaxTools bounds a tool list (toolGrants, a tool policy).
const MaxTools = 200

// Effective is a snapshot minus the revoked scopes, sorted and without
// duplicates.
func Effective(snapshot, revoked []string) []string { return auth.Without(snapshot, revoked) }

// ParseTools validates a list of actionId@version (toolGrants, a tool
// policy) named field in the request, and returns it normalized: sorted,
// without duplicates. nil stays nil (the list was not given); an empty list
// stays empty. A malformed entry or more than MaxTools entries is
// INVALID_REQUEST with details {field, index, value}.
func ParseTools(field string, list []string) ([]string, error) {
	if list == nil {
		return nil, nil
	}
	if len(list) > MaxTools {
		return nil, failure.New(failure.CodeInvalidRequest, "%s lists %d tools; at most %d", field, len(list), MaxTools).
			WithDetails(map[string]any{"field": field})
	}
	out := make([]string, 0, len(list))
	for i, t := range list {
		ref, err := graph.ParseActionRef(t)
		if err != nil || strings.TrimSpace(ref.ID) != ref.ID || strings.ContainsAny(ref.ID, "@\x00") {
			return nil, failure.New(failure.CodeInvalidRequest, "%s[%d] %q is not actionId@version", field, i, t).
				WithDetails(map[string]any{"field": field, "index": i, "value": t})
		}
		if s := ref.String(); !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out, nil
}

// SameTools reports whether two normalized tool lists grant the same: nil
// (not narrowed) differs from empty (nothing).
func SameTools(a, b []string) bool {
	if (a == nil) != (b == nil) {
		return false
	}
	return slices.Equal(a, b)
}

// Grant is what a run may do now: its effective permissions and the tool
// lists that narrow its agents' tools.
type Grant struct {
	// Permissions is the snapshot minus the principal's current
	// revocations: what handlers receive as catalog.Call.Permissions.
	Permissions []string
	// Revoked are the snapshot's scopes revoked now from Principal.
	Revoked   []string
	Principal string
	limits    []limit
}

// limit is one list a tool must be on, named for the denial message.
type limit struct {
	what  string // "the run's tool grants"
	tools []string
}

// Static is a grant of perms with no tool list: what a caller that has no
// store to read (a test, a harness used on its own) decides with.
func Static(perms []string) Grant {
	return Grant{Permissions: Effective(perms, nil)}
}

// FromRun turns a run's authority, as just read, into a grant.
func FromRun(a store.RunAuthority) Grant {
	g := Grant{Permissions: Effective(a.Permissions, a.Revoked), Principal: a.Principal}
	for _, s := range a.Permissions {
		if slices.Contains(a.Revoked, s) && !slices.Contains(g.Revoked, s) {
			g.Revoked = append(g.Revoked, s)
		}
	}
	slices.Sort(g.Revoked)
	if a.ToolGrants != nil {
		g.limits = append(g.limits, limit{what: "the run's toolGrants", tools: a.ToolGrants})
	}
	if a.Actor.Kind != "service" {
		return g
	}
	name := "its service actor " + a.Actor.Sub
	if b := a.Bridge; b != nil {
		name = b.Kind + " " + b.ID
	}
	if a.RunToolPolicy != nil {
		g.limits = append(g.limits, limit{what: name + "'s tool policy when it started the run", tools: a.RunToolPolicy})
	}
	switch b := a.Bridge; {
	case b == nil || !b.Found:
		g.limits = append(g.limits, limit{what: "a tool policy (" + name + " has none)", tools: []string{}})
	case b.Deleted:
		g.limits = append(g.limits, limit{what: "a tool policy (" + name + " was deleted)", tools: []string{}})
	default:
		g.limits = append(g.limits, limit{what: name + "'s tool policy", tools: b.ToolPolicy})
	}
	return g
}

// Decision is the answer for one tool.
type Decision struct {
	Allowed bool
	// Why says which term refused it ("the run's permissions lack
	// notes.write (revoked from alice)", "it is not in schedule sch_x's
	// tool policy").
	Why string
	// Missing lists the required permissions the run lacks now.
	Missing []string
}

// Tool decides whether the tool ref (actionId@version), requiring
// permissions required, may be offered or called now.
func (g Grant) Tool(ref string, required []string) Decision {
	if missing := auth.Missing(g.Permissions, required); len(missing) > 0 {
		why := "the run's permissions lack " + strings.Join(missing, ", ")
		var revoked []string
		for _, m := range missing {
			if slices.Contains(g.Revoked, m) {
				revoked = append(revoked, m)
			}
		}
		if len(revoked) > 0 {
			why += fmt.Sprintf(" (%s revoked from %s)", strings.Join(revoked, ", "), g.Principal)
		}
		return Decision{Why: why, Missing: missing}
	}
	for _, l := range g.limits {
		if !slices.Contains(l.tools, ref) {
			return Decision{Why: "it is not in " + l.what}
		}
	}
	return Decision{Allowed: true}
}
