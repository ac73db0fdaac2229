package variables

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/weftworks/weft/failure"
)

// Refusal codes returned by Registry.Resolve (as Refusal.Code).
const (
	// CodeUnknownVariable: a token is neither a registered key nor in
	// Request.Values, or a `{{ … }}` holds something that is not a key.
	CodeUnknownVariable = "UNKNOWN_VARIABLE"
	// CodeMissingScope: a variable's scope is not in Request.Permissions.
	CodeMissingScope = failure.CodeMissingScope
	// CodeMissingBinding: a variable's required binding is absent or empty in
	// Request.Bindings.
	CodeMissingBinding = "MISSING_BINDING"
	// CodeCancelled: the request context ended before resolution finished.
	CodeCancelled = "CANCELLED"
	// CodeRecordNotFound: a source found no record for its binding in the
	// request's tenant (including a record owned by another tenant).
	CodeRecordNotFound = "RECORD_NOT_FOUND"
	// CodeSourceFailed: a source failed; its error is kept for logs only.
	CodeSourceFailed = "SOURCE_FAILED"
)

// ErrRecordNotFound is what a Source (or a lookup behind it) returns, possibly
// wrapped, when the bound record does not exist in the request's tenant. It is
// failure.ErrNotFound, so a store's not-found sentinel passes through as is.
var ErrRecordNotFound = failure.ErrNotFound

// Refusal is the error Registry.Resolve returns. Error() and Message are safe
// to show a client; the internal cause of a source failure is reachable only
// through Unwrap (for logs). errors.As(err, &fe) with fe *failure.Error also
// succeeds, yielding AsFailure(), so failure.CodeOf and the API's error
// mapping see the refusal's code.
type Refusal struct {
	// Code is one of the Code* constants of this package.
	Code string
	// Message is a client-safe description.
	Message string
	// Keys are the variable keys concerned, in first-seen order (for
	// UNKNOWN_VARIABLE also the content of invalid tokens).
	Keys []string
	// Scopes are the missing scopes, sorted (MISSING_SCOPE only).
	Scopes []string
	// Bindings are the missing binding names, sorted (MISSING_BINDING only).
	Bindings []string

	cause error
}

// Error returns "CODE: message"; it never contains a source's error text.
func (r *Refusal) Error() string { return r.Code + ": " + r.Message }

// Unwrap returns the internal cause (a source's error, or the context error),
// for logging. It is nil for validation refusals.
func (r *Refusal) Unwrap() error { return r.cause }

// Retryable reports whether trying again later may succeed: only a source
// failure is. Every other refusal is permanent for the same input.
func (r *Refusal) Retryable() bool { return r.Code == CodeSourceFailed }

// AsFailure converts r to the repo's coded error. Details carry "keys",
// "scopes" and "bindings" when non-empty; Err carries the internal cause.
func (r *Refusal) AsFailure() *failure.Error {
	fe := &failure.Error{Code: r.Code, Message: r.Message, Err: r.cause}
	details := map[string]any{}
	if len(r.Keys) > 0 {
		details["keys"] = r.Keys
	}
	if len(r.Scopes) > 0 {
		details["scopes"] = r.Scopes
	}
	if len(r.Bindings) > 0 {
		details["bindings"] = r.Bindings
	}
	if len(details) > 0 {
		fe.Details = details
	}
	return fe
}

// As lets errors.As find a *failure.Error in a Refusal.
func (r *Refusal) As(target any) bool {
	if fe, ok := target.(**failure.Error); ok {
		*fe = r.AsFailure()
		return true
	}
	return false
}

// Actor is the principal a template is resolved for.
type Actor struct {
	// Sub is the subject (JWT `sub`).
	Sub string
	// Name is the display name (JWT `name`), may be empty.
	Name string
	// Email is the e-mail address (JWT `email`), may be empty.
	Email string
}

// Request is the trusted input of Registry.Resolve. The server builds it from
// the authenticated principal and the run; never decode it from a client body
// (only Bindings and Values may come from a client).
type Request struct {
	// TenantID is the trusted tenant every source must resolve under.
	TenantID string
	// TenantName is the tenant's display name (JWT `tenantName`), may be empty.
	TenantName string
	// Actor is the principal.
	Actor Actor
	// Permissions is the principal's immutable scope snapshot.
	Permissions []string
	// RunID is the run being resolved for; empty outside a run.
	RunID string
	// WorkflowKey is the workflow being run; empty outside a run.
	WorkflowKey string
	// Today is the date `context.today` renders (YYYY-MM-DD in Today's own
	// location). In a run it comes from the run's start time, never the wall clock.
	Today time.Time
	// Bindings are explicit record bindings (e.g. "agentId": "support-bot").
	Bindings map[string]string
	// Values are caller-owned values. A key present here is resolved from it
	// without consulting any source or checking any scope, even if the key is
	// also registered.
	Values map[string]string
}

// ResolveFunc resolves keys for one request. It must return a value for every
// key (an empty string is a value), or an error: ErrRecordNotFound (wrapped
// or not) when a bound record is absent in req.TenantID, anything else for a
// failure.
type ResolveFunc func(ctx context.Context, req Request, keys []string) (map[string]string, error)

// Source provides a set of variables and resolves them.
type Source interface {
	// Definitions lists the variables the source provides. It must return
	// the same list every time.
	Definitions() []Definition
	// Resolve resolves a non-empty subset of the source's keys; see ResolveFunc.
	// The registry calls it only after the whole template has been validated
	// and every scope and binding of the requested keys is present.
	Resolve(ctx context.Context, req Request, keys []string) (map[string]string, error)
}

// NewSource returns a Source made of fixed definitions and a resolve function.
func NewSource(defs []Definition, resolve ResolveFunc) Source {
	return funcSource{defs: defs, resolve: resolve}
}

type funcSource struct {
	defs    []Definition
	resolve ResolveFunc
}

func (s funcSource) Definitions() []Definition { return s.defs }

func (s funcSource) Resolve(ctx context.Context, req Request, keys []string) (map[string]string, error) {
	return s.resolve(ctx, req, keys)
}

// Registry holds the registered variable definitions and their sources. It is
// immutable after NewRegistry and safe for concurrent use.
type Registry struct {
	sources []Source
	byKey   map[string]entry
	sorted  []Definition
}

type entry struct {
	def Definition
	src int // index into sources
}

// NewRegistry registers the sources' definitions. It fails when a definition
// is malformed (key, label, kind, binding names) or a key is registered twice.
func NewRegistry(sources ...Source) (*Registry, error) {
	r := &Registry{byKey: map[string]entry{}}
	for i, s := range sources {
		if s == nil {
			return nil, fmt.Errorf("variables: source %d is nil", i)
		}
		r.sources = append(r.sources, s)
		for _, d := range s.Definitions() {
			if err := d.validate(); err != nil {
				return nil, err
			}
			if _, dup := r.byKey[d.Key]; dup {
				return nil, fmt.Errorf("variables: key %q registered twice", d.Key)
			}
			d = d.clone()
			r.byKey[d.Key] = entry{def: d, src: i}
			r.sorted = append(r.sorted, d)
		}
	}
	sort.Slice(r.sorted, func(a, b int) bool { return r.sorted[a].Key < r.sorted[b].Key })
	return r, nil
}

// Definitions returns every registered definition sorted by key, regardless
// of scope (for graph validation; clients get List).
func (r *Registry) Definitions() []Definition {
	out := make([]Definition, 0, len(r.sorted))
	for _, d := range r.sorted {
		out = append(out, d.clone())
	}
	return out
}

// List returns the definitions a principal holding scopes may use, sorted by
// key: every scope-less definition and those whose Scope is in scopes. It is
// the only definition list a client should see. It never returns nil.
func (r *Registry) List(scopes []string) []Definition {
	out := []Definition{}
	for _, d := range r.sorted {
		if d.Scope == "" || contains(scopes, d.Scope) {
			out = append(out, d.clone())
		}
	}
	return out
}

// Lookup returns the definition registered under key.
func (r *Registry) Lookup(key string) (Definition, bool) {
	e, ok := r.byKey[key]
	if !ok {
		return Definition{}, false
	}
	return e.def.clone(), true
}

// Resolve renders template for req. It first validates the whole template and
// refuses, before any source runs, with UNKNOWN_VARIABLE (a token neither in
// req.Values nor registered, or an invalid token), then MISSING_SCOPE, then
// MISSING_BINDING. It then calls each source that owns a needed key once, in
// registration order, with the keys in first-seen order, refusing with
// CANCELLED when ctx ends, RECORD_NOT_FOUND when a source reports
// ErrRecordNotFound, and SOURCE_FAILED (generic message, cause kept for logs)
// for any other source error, a panic, or a missing value. Every token is
// resolved (there is no keep/blank here); `\{{` renders as `{{`; values are
// never re-scanned. Any error it returns is a *Refusal.
func (r *Registry) Resolve(ctx context.Context, template string, req Request) (string, error) {
	// 1. Unknown keys and invalid tokens, in first-seen order.
	var unknownSet, neededSet distinct // needed: registered keys not supplied by req.Values
	for i := 0; i < len(template); {
		p := scan(template, i)
		i = p.end
		if p.kind != pieceToken && p.kind != pieceInvalid {
			continue
		}
		k := template[p.ks:p.ke]
		if p.kind == pieceInvalid {
			unknownSet.add(k)
			continue
		}
		if _, ok := req.Values[k]; ok {
			continue
		}
		if _, ok := r.byKey[k]; !ok {
			unknownSet.add(k)
			continue
		}
		neededSet.add(k)
	}
	unknown, needed := unknownSet.list, neededSet.list
	if len(unknown) > 0 {
		return "", &Refusal{
			Code:    CodeUnknownVariable,
			Message: "template uses unknown variables: " + quoteList(unknown),
			Keys:    unknown,
		}
	}

	// 2. Scopes.
	var forbidden, scopes []string
	for _, k := range needed {
		if s := r.byKey[k].def.Scope; s != "" && !contains(req.Permissions, s) {
			forbidden = append(forbidden, k)
			scopes = appendDistinct(scopes, s)
		}
	}
	if len(forbidden) > 0 {
		sort.Strings(scopes)
		return "", &Refusal{
			Code:    CodeMissingScope,
			Message: fmt.Sprintf("variables %s need scopes the request does not hold: %s", quoteList(forbidden), quoteList(scopes)),
			Keys:    forbidden,
			Scopes:  scopes,
		}
	}

	// 3. Bindings.
	var unbound, bindings []string
	for _, k := range needed {
		missing := false
		for _, b := range r.byKey[k].def.RequiredBindings {
			if req.Bindings[b] == "" {
				missing = true
				bindings = appendDistinct(bindings, b)
			}
		}
		if missing {
			unbound = append(unbound, k)
		}
	}
	if len(unbound) > 0 {
		sort.Strings(bindings)
		return "", &Refusal{
			Code:     CodeMissingBinding,
			Message:  fmt.Sprintf("variables %s need bindings the request does not carry: %s", quoteList(unbound), quoteList(bindings)),
			Keys:     unbound,
			Bindings: bindings,
		}
	}

	// 4. Sources, in registration order.
	resolved := make(map[string]string, len(needed))
	if len(needed) > 0 {
		perSource := make([][]string, len(r.sources))
		for _, k := range needed {
			i := r.byKey[k].src
			perSource[i] = append(perSource[i], k)
		}
		for i, ks := range perSource {
			if len(ks) == 0 {
				continue
			}
			if err := ctx.Err(); err != nil {
				return "", cancelled(ks, err)
			}
			vals, err := callSource(ctx, r.sources[i], req, ks)
			if err != nil {
				switch {
				case ctx.Err() != nil:
					return "", cancelled(ks, errors.Join(ctx.Err(), err))
				case errors.Is(err, ErrRecordNotFound):
					return "", &Refusal{
						Code:    CodeRecordNotFound,
						Message: "no record found for variables: " + quoteList(ks),
						Keys:    ks,
						cause:   err,
					}
				default:
					return "", sourceFailed(ks, err)
				}
			}
			for _, k := range ks {
				v, ok := vals[k]
				if !ok {
					return "", sourceFailed(ks, fmt.Errorf("variables: source returned no value for %q", k))
				}
				resolved[k] = v
			}
		}
	}

	// 5. Render. Every token has a value by now.
	var b strings.Builder
	b.Grow(len(template))
	for i := 0; i < len(template); {
		p := scan(template, i)
		b.WriteString(template[i:p.start])
		switch p.kind {
		case pieceToken:
			k := template[p.ks:p.ke]
			if v, ok := req.Values[k]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(resolved[k])
			}
		case pieceEscape:
			b.WriteString("{{")
		}
		i = p.end
	}
	return b.String(), nil
}

// callSource calls s, turning a panic into an error.
func callSource(ctx context.Context, s Source, req Request, keys []string) (vals map[string]string, err error) {
	defer func() {
		if p := recover(); p != nil {
			vals, err = nil, fmt.Errorf("variables: source panicked: %v", p)
		}
	}()
	return s.Resolve(ctx, req, append([]string(nil), keys...))
}

func cancelled(keys []string, cause error) *Refusal {
	return &Refusal{Code: CodeCancelled, Message: "variable resolution was cancelled", Keys: keys, cause: cause}
}

func sourceFailed(keys []string, cause error) *Refusal {
	return &Refusal{
		Code:    CodeSourceFailed,
		Message: "a variable source failed to resolve: " + quoteList(keys),
		Keys:    keys,
		cause:   cause,
	}
}

// quoteList quotes up to 10 strings for a message; Refusal fields hold them all.
func quoteList(list []string) string {
	const limit = 10
	q := make([]string, 0, min(len(list), limit)+1)
	for i, s := range list {
		if i == limit {
			q = append(q, fmt.Sprintf("and %d more", len(list)-limit))
			break
		}
		q = append(q, fmt.Sprintf("%q", s))
	}
	return strings.Join(q, ", ")
}

// Check returns, in first-seen order, the template's unknown variables for
// graph validation: keys neither bound explicitly (a key of bindings) nor
// registered in defs, plus the content of every invalid token. It never
// returns nil.
func Check(template string, bindings map[string]string, defs []Definition) []string {
	known := make(map[string]bool, len(defs))
	for _, d := range defs {
		known[d.Key] = true
	}
	var unknown distinct
	for i := 0; i < len(template); {
		p := scan(template, i)
		i = p.end
		if p.kind != pieceToken && p.kind != pieceInvalid {
			continue
		}
		k := template[p.ks:p.ke]
		if p.kind == pieceInvalid {
			unknown.add(k)
			continue
		}
		if _, bound := bindings[k]; bound || known[k] {
			continue
		}
		unknown.add(k)
	}
	return unknown.strings()
}

// registryKeys returns the template's registered keys that bindings does not
// bind explicitly, with their definitions.
func registryKeys(template string, bindings map[string]string, defs []Definition) []Definition {
	byKey := make(map[string]int, len(defs))
	for i, d := range defs {
		byKey[d.Key] = i
	}
	var out []Definition
	for _, k := range Extract(template) {
		if _, bound := bindings[k]; bound {
			continue
		}
		if i, ok := byKey[k]; ok {
			out = append(out, defs[i])
		}
	}
	return out
}

// Scopes returns the sorted distinct scopes the template's registered
// variables need (keys bound explicitly in bindings need none). They count
// as the node's required permissions. It never returns nil.
func Scopes(template string, bindings map[string]string, defs []Definition) []string {
	out := []string{}
	for _, d := range registryKeys(template, bindings, defs) {
		if d.Scope != "" {
			out = appendDistinct(out, d.Scope)
		}
	}
	sort.Strings(out)
	return out
}

// MissingBindings returns the sorted distinct binding names the template's
// registered variables require that are not keys of bindings (for graph
// validation; e.g. `{{ agent.name }}` without an "agentId" binding). It never
// returns nil.
func MissingBindings(template string, bindings map[string]string, defs []Definition) []string {
	out := []string{}
	for _, d := range registryKeys(template, bindings, defs) {
		for _, b := range d.RequiredBindings {
			if _, ok := bindings[b]; !ok {
				out = appendDistinct(out, b)
			}
		}
	}
	sort.Strings(out)
	return out
}
