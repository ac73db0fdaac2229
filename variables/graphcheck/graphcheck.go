// Package graphcheck adapts the variable registry to graph validation: a
// Checker implements graph.TemplateChecker, so publication, dry-run and
// compilation report UNKNOWN_VARIABLE for mapping templates and count the
// scopes of a template's variables as the node's required permissions
// (SPEC §2, §6).
//
// It is its own package so that package variables stays free of graph (and
// graph's own tests may import variables without an import cycle); graph
// never imports either.
//
// Wiring: build one registry (variables.Builtin) and hand New(reg) to
// publication.Resolver.Templates; every graph.ValidateWith / DryRunWith /
// CompileWith then uses it through Resolver.Options(). Dry-run, publication
// and simulated drafts go through Resolver.ForScopes(principal scopes),
// which swaps in New(reg).ForScopes(...) so variables the caller may not
// read are refused too.
package graphcheck

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/variables"
)

// Checker checks mapping templates against a variable registry. It is
// immutable and safe for concurrent use.
type Checker struct {
	reg *variables.Registry
	// scopes, when scoped, are the principal's scopes: a registered variable
	// whose scope is not among them is reported as unknown to that principal
	// (GET /v1/variables does not list it to them either).
	scopes []string
	scoped bool
}

var _ graph.TemplateChecker = (*Checker)(nil)

// New returns a Checker over reg. It panics when reg is nil: a nil registry is
// a wiring bug, and validating against nothing would reject every variable.
func New(reg *variables.Registry) *Checker {
	if reg == nil {
		panic("graphcheck: New needs a registry")
	}
	return &Checker{reg: reg}
}

// ForScopes returns a Checker that also refuses, as UNKNOWN_VARIABLE, every
// registered variable the template would read from the registry whose scope
// is not in scopes (a forbidden variable). Use it where a principal is known
// (publication, dry-run) so a publisher cannot embed a variable they could
// not read themselves. A nil or empty scopes allows only scope-less variables.
func (c *Checker) ForScopes(scopes []string) *Checker {
	return &Checker{reg: c.reg, scopes: append([]string(nil), scopes...), scoped: true}
}

// CheckTemplate implements graph.TemplateChecker. Every issue has an empty
// (template-relative) Path, so graph places it at
// /nodes/<i>/mapping/<field>/template. It reports:
//
//   - LIMIT_EXCEEDED when the template is longer than
//     graph.DefaultLimits.MaxTemplateChars characters (nothing else is checked);
//   - UNKNOWN_VARIABLE, once each in first-seen order (variables.Check), for a
//     `{{ … }}` whose content is not a variable key and for a key neither
//     bound explicitly (a key of bindings) nor registered;
//   - then, per registered key the template reads from the registry, in
//     first-seen order: UNKNOWN_VARIABLE when its scope is not held
//     (ForScopes checkers only), else UNKNOWN_VARIABLE when its source needs
//     a binding (e.g. agent.name needs agentId) that bindings does not bind.
//
// Scopes are the sorted distinct scopes of the registered variables the
// template reads (explicitly bound keys need none); they are returned even
// when there are issues, so a dry-run can show them. Both results are never
// nil.
func (c *Checker) CheckTemplate(template string, bindings map[string]string) ([]string, []graph.Issue) {
	issues := []graph.Issue{}
	if n, limit := utf8.RuneCountInString(template), graph.DefaultLimits.MaxTemplateChars; n > limit {
		issues = append(issues, graph.Issue{Code: graph.CodeLimitExceeded,
			Message: fmt.Sprintf("template has %d characters; the limit is %d", n, limit)})
		return []string{}, issues
	}
	defs := c.reg.Definitions()
	for _, u := range variables.Check(template, bindings, defs) {
		msg := fmt.Sprintf("unknown variable %q: it is neither bound in this mapping's bindings nor a registered variable (see GET /v1/variables)", u)
		if !variables.IsKey(u) {
			msg = fmt.Sprintf("{{ %s }} is not a variable key (keys are dot paths like context.user.displayName); write \\{{ for a literal {{", u)
		}
		issues = append(issues, graph.Issue{Code: graph.CodeUnknownVariable, Message: msg})
	}
	for _, key := range variables.Extract(template) {
		if _, bound := bindings[key]; bound {
			continue // resolved from the bound pointer's value, before the registry
		}
		def, ok := c.reg.Lookup(key)
		if !ok {
			continue // reported above
		}
		if msg := c.unusable(def, bindings); msg != "" {
			issues = append(issues, graph.Issue{Code: graph.CodeUnknownVariable, Message: msg})
		}
	}
	return variables.Scopes(template, bindings, defs), issues
}

// unusable returns why the registered variable def cannot be read by this
// template, or "".
func (c *Checker) unusable(def variables.Definition, bindings map[string]string) string {
	if c.scoped && def.Scope != "" && !contains(c.scopes, def.Scope) {
		return fmt.Sprintf("variable %q needs scope %q, which the caller does not hold", def.Key, def.Scope)
	}
	var missing []string
	for _, b := range def.RequiredBindings {
		if _, ok := bindings[b]; !ok {
			missing = append(missing, b)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	return fmt.Sprintf("variable %q needs binding %q, which this mapping does not bind (add a pointer to bindings, e.g. %q: \"/in/...\")",
		def.Key, strings.Join(missing, `", "`), missing[0])
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}
