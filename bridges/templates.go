package bridges

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/variables"
)

// Templated schedule input (variables seed: "agent.name requires the
// schedule's explicit agentId ... The schedule keeps the raw template; only
// the queued run receives the resolved input"). String values of a
// schedule's input may hold {{ }} templates, resolved with the schedule's
// explicit bindings:
//
//   - at creation every template is checked against the variable registry
//     and the creator's scopes (token scopes minus revocations): an
//     unknown variable, or one whose scope the creator does not hold, is
//     422 UNKNOWN_VARIABLE; a variable whose required binding is absent is
//     422 MISSING_BINDING; each listed in details.issues at its path;
//   - the schedule stores the input raw, with its bindings;
//   - at each firing the templates are resolved once, as the schedule's
//     service actor (its permissions: the creator's snapshot minus current
//     revocations; context.today is the firing's scheduled date), and the
//     resolved input is stored with the firing before the enqueue, so a
//     retried enqueue of the firing reuses it;
//   - a refusal (a scope revoked since: PERMISSION_DENIED; a bound record
//     gone: RECORD_NOT_FOUND) is recorded as the firing's refusal; a
//     failing source is retried like any transient failure.
//
// run.id is not offered: a firing's input is resolved before its run exists.

// Limits of schedule templates.
const (
	// maxInputBindings bounds a schedule's bindings.
	maxInputBindings = 16
	// maxBindingChars bounds one binding value.
	maxBindingChars = 200
	// maxInputTemplates bounds how many strings of one input are templates.
	maxInputTemplates = 256
	// resolveTimeout bounds one firing's resolution.
	resolveTimeout = 10 * time.Second
)

// unavailableInSchedules are variables a schedule's input cannot use.
var unavailableInSchedules = []string{variables.KeyRunID}

// inputString is one string value of an input, at its JSON pointer.
type inputString struct {
	path string
	text string
}

// hasTemplate reports whether s holds a {{ }} construct (a token, an
// escape or an invalid token): only such strings are templates.
func hasTemplate(s string) bool {
	for _, seg := range variables.Tokenize(s) {
		if seg.Kind != variables.SegmentText {
			return true
		}
	}
	return false
}

// templateStrings returns the string values of v that hold templates, in
// a deterministic order (object members by key), with their pointers under
// prefix.
func templateStrings(v any, prefix string, out []inputString) []inputString {
	switch t := v.(type) {
	case string:
		if hasTemplate(t) {
			out = append(out, inputString{path: prefix, text: t})
		}
	case []any:
		for i, e := range t {
			out = templateStrings(e, prefix+"/"+strconv.Itoa(i), out)
		}
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(t)) {
			out = templateStrings(t[k], prefix+"/"+graph.EscapePointerToken(k), out)
		}
	}
	return out
}

// scheduleVariables are the definitions a schedule's input may use.
func scheduleVariables(reg *variables.Registry) []variables.Definition {
	return slices.DeleteFunc(reg.Definitions(), func(d variables.Definition) bool {
		return slices.Contains(unavailableInSchedules, d.Key)
	})
}

// checkBindings refuses malformed bindings: each name must be a binding a
// registered variable requires, each value a short one-line string.
func checkBindings(reg *variables.Registry, bindings map[string]string) error {
	if len(bindings) > maxInputBindings {
		return failure.New(failure.CodeInvalidRequest, "a schedule takes at most %d bindings", maxInputBindings).
			WithDetails(map[string]any{"field": "bindings"})
	}
	known := map[string]bool{}
	for _, d := range reg.Definitions() {
		for _, b := range d.RequiredBindings {
			known[b] = true
		}
	}
	for name, v := range bindings {
		field := "bindings/" + name
		switch {
		case !known[name]:
			names := slices.Sorted(maps.Keys(known))
			return failure.New(failure.CodeInvalidRequest, "binding %q is required by no variable (known bindings: %s)", name, strings.Join(names, ", ")).
				WithDetails(map[string]any{"field": field})
		case strings.TrimSpace(v) == "" || utf8.RuneCountInString(v) > maxBindingChars ||
			strings.IndexFunc(v, unicode.IsControl) >= 0:
			return failure.New(failure.CodeInvalidRequest, "binding %q must be a non-blank string of at most %d characters without control characters", name, maxBindingChars).
				WithDetails(map[string]any{"field": field})
		}
	}
	return nil
}

// checkInputTemplates validates a schedule's input templates against the
// registry and the creator's scopes now (token scopes minus revocations).
// It reports whether the input holds templates at all.
func checkInputTemplates(reg *variables.Registry, creatorScopes []string, input json.RawMessage, bindings map[string]string) (bool, error) {
	if err := checkBindings(reg, bindings); err != nil {
		return false, err
	}
	v, err := graph.DecodeValue(input)
	if err != nil {
		return false, failure.New(failure.CodeInvalidRequest, "input is not valid JSON")
	}
	strs := templateStrings(v, "/input", nil)
	if len(strs) == 0 {
		if len(bindings) > 0 {
			return false, failure.New(failure.CodeInvalidRequest, "bindings are given but the input holds no {{ }} template").
				WithDetails(map[string]any{"field": "bindings"})
		}
		return false, nil
	}
	if len(strs) > maxInputTemplates {
		return false, failure.New(graph.CodeLimitExceeded, "the input holds %d templates; the limit is %d", len(strs), maxInputTemplates).
			WithDetails(map[string]any{"field": "input"})
	}
	defs := scheduleVariables(reg)
	all := reg.Definitions()
	var issues []graph.Issue
	unknownCode := false
	for _, s := range strs {
		if n := utf8.RuneCountInString(s.text); n > graph.DefaultLimits.MaxTemplateChars {
			return false, failure.New(graph.CodeLimitExceeded, "the template at %s has %d characters; the limit is %d", s.path, n, graph.DefaultLimits.MaxTemplateChars).
				WithDetails(map[string]any{"field": "input", "path": s.path})
		}
		res := variables.Validate(s.text, defs, creatorScopes)
		for _, k := range res.Unknown {
			unknownCode = true
			msg := fmt.Sprintf("{{ %s }} is not a variable (see GET /v1/variables)", k)
			if slices.Contains(unavailableInSchedules, k) {
				msg = fmt.Sprintf("{{ %s }} is not available in a schedule's input: it is resolved before the run exists", k)
			}
			issues = append(issues, graph.Issue{Code: variables.CodeUnknownVariable, Path: s.path, Message: msg})
		}
		for _, k := range res.Forbidden {
			unknownCode = true
			scope := ""
			if d, ok := reg.Lookup(k); ok {
				scope = d.Scope
			}
			issues = append(issues, graph.Issue{Code: variables.CodeUnknownVariable, Path: s.path,
				Message: fmt.Sprintf("{{ %s }} needs scope %s, which you do not hold; the schedule runs as you", k, scope)})
		}
		if missing := variables.MissingBindings(s.text, bindings, all); len(missing) > 0 {
			issues = append(issues, graph.Issue{Code: variables.CodeMissingBinding, Path: s.path,
				Message: fmt.Sprintf("the template needs bindings %s: give them in the schedule's bindings (e.g. {\"agentId\": \"<agent key>\"})", strings.Join(missing, ", "))})
		}
	}
	if len(issues) == 0 {
		return true, nil
	}
	code := variables.CodeMissingBinding
	if unknownCode {
		code = variables.CodeUnknownVariable
	}
	return false, failure.New(code, "the schedule's input templates have %d issue(s); see details.issues", len(issues)).
		WithDetails(map[string]any{"issues": issues})
}

// resolveInput resolves every template of a schedule's input for one firing
// as its service actor with perms, rendering the same JSON shape with the
// strings replaced. A refusal is a *failure.Error the firing records; a
// failing source is returned as a retryable error.
func resolveInput(ctx context.Context, reg *variables.Registry, a serviceActor, scheduledAt time.Time, perms []string,
	input json.RawMessage, bindings map[string]string) (json.RawMessage, error) {
	v, err := graph.DecodeValue(input)
	if err != nil {
		return nil, failure.New(failure.CodeInvalidInput, "the schedule's input is not valid JSON")
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	req := variables.Request{
		TenantID: a.tenantID, TenantName: a.tenantName,
		Actor:       variables.Actor{Sub: a.kind + ":" + a.id},
		Permissions: perms, WorkflowKey: a.workflowKey, Today: scheduledAt.UTC(), Bindings: bindings,
	}
	out, err := resolveValue(ctx, reg, req, v, "/input")
	if err != nil {
		return nil, err
	}
	return json.Marshal(out)
}

func resolveValue(ctx context.Context, reg *variables.Registry, req variables.Request, v any, path string) (any, error) {
	switch t := v.(type) {
	case string:
		if !hasTemplate(t) {
			return t, nil
		}
		if slices.ContainsFunc(variables.Extract(t), func(k string) bool { return slices.Contains(unavailableInSchedules, k) }) {
			return nil, failure.New(variables.CodeUnknownVariable, "the template at %s uses a variable a schedule's input cannot use", path)
		}
		s, err := reg.Resolve(ctx, t, req)
		if err != nil {
			return nil, firingRefusal(err, path)
		}
		return s, nil
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			r, err := resolveValue(ctx, reg, req, e, path+"/"+strconv.Itoa(i))
			if err != nil {
				return nil, err
			}
			out[i] = r
		}
		return out, nil
	case map[string]any:
		out := make(map[string]any, len(t))
		for _, k := range slices.Sorted(maps.Keys(t)) {
			r, err := resolveValue(ctx, reg, req, t[k], path+"/"+graph.EscapePointerToken(k))
			if err != nil {
				return nil, err
			}
			out[k] = r
		}
		return out, nil
	}
	return v, nil
}

// firingRefusal maps a resolution refusal to what the firing records: a
// scope the creator lost is PERMISSION_DENIED with details.missing (as any
// revocation reaching a firing); other refusals keep their code. A source
// failure, or a resolution cut short, is returned as is: the firing is
// retried.
func firingRefusal(err error, path string) error {
	var ref *variables.Refusal
	if !errors.As(err, &ref) {
		return err
	}
	if ref.Retryable() || ref.Code == variables.CodeCancelled {
		// Not wrapped: a *variables.Refusal reads as a coded error, which
		// would be recorded as a refusal instead of retried.
		return &transientError{msg: "bridges: resolve the input template at " + path, cause: err}
	}
	details := map[string]any{"path": path, "variables": ref.Keys}
	if ref.Code == variables.CodeMissingScope {
		details["missing"] = ref.Scopes
		return failure.New(failure.CodePermissionDenied, "the input template at %s needs %s, which the schedule's creator no longer holds: %s",
			path, strings.Join(ref.Scopes, ", "), ref.Message).WithDetails(details)
	}
	return failure.New(ref.Code, "the input template at %s was refused: %s", path, ref.Message).WithDetails(details)
}

// creatorScopesNow is the creator's token scopes minus their current
// revocations: what a template checked at creation may read.
func (e *Enqueuer) creatorScopesNow(ctx context.Context, creator auth.Principal) ([]string, error) {
	revoked, err := e.store.RevokedScopes(ctx, creator.Tenant, creator.Sub)
	if err != nil {
		return nil, err
	}
	return Effective(creator.Scopes, revoked), nil
}

// transientError is a resolution worth retrying (a source failed, or the
// resolution was cut short). It does not unwrap to the refusal, so it is
// never mistaken for a coded refusal.
type transientError struct {
	msg   string
	cause error
}

func (e *transientError) Error() string { return e.msg + ": " + e.cause.Error() }
