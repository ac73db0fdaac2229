package variables

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/failure"
)

// agentStore is an in-memory AgentLookup holding agents of several tenants.
type agentStore struct {
	agents map[string]map[string]string // tenant -> agent key -> name
	calls  atomic.Int32
}

func (s *agentStore) AgentName(_ context.Context, tenantID, agentKey string) (string, error) {
	s.calls.Add(1)
	name, ok := s.agents[tenantID][agentKey]
	if !ok {
		return "", fmt.Errorf("agent %q in tenant %q: %w", agentKey, tenantID, failure.ErrNotFound)
	}
	return name, nil
}

// countingSource wraps a Source and records its calls.
type countingSource struct {
	Source
	mu    sync.Mutex
	calls [][]string
}

func (c *countingSource) Resolve(ctx context.Context, req Request, keys []string) (map[string]string, error) {
	c.mu.Lock()
	c.calls = append(c.calls, append([]string(nil), keys...))
	c.mu.Unlock()
	return c.Source.Resolve(ctx, req, keys)
}

func (c *countingSource) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.calls)
}

type bundle struct {
	reg    *Registry
	agents *agentStore
	ctxSrc *countingSource
	runSrc *countingSource
	agSrc  *countingSource
}

func (b *bundle) sourceCalls() int { return b.ctxSrc.count() + b.runSrc.count() + b.agSrc.count() }

func setup(t *testing.T) *bundle {
	t.Helper()
	agents := &agentStore{agents: map[string]map[string]string{
		"tenant-a": {"support-bot": "Support triage"},
		"tenant-b": {"sales-bot": "Sales assistant"},
	}}
	b := &bundle{
		agents: agents,
		ctxSrc: &countingSource{Source: ContextSource()},
		runSrc: &countingSource{Source: RunSource()},
		agSrc:  &countingSource{Source: AgentNameSource(agents)},
	}
	reg, err := NewRegistry(b.ctxSrc, b.runSrc, b.agSrc)
	require.NoError(t, err)
	b.reg = reg
	return b
}

func request() Request {
	return Request{
		TenantID:    "tenant-a",
		TenantName:  "Acme",
		Actor:       Actor{Sub: "u-1", Name: "Ada Lovelace", Email: "ada@example.com"},
		Permissions: []string{"runs.execute", ScopeAgentsRead},
		RunID:       "run-42",
		WorkflowKey: "invoice-intake",
		Today:       time.Date(2026, 3, 9, 23, 30, 0, 0, time.FixedZone("X", -5*3600)),
		Bindings:    map[string]string{BindingAgentID: "support-bot"},
	}
}

func refusal(t *testing.T, err error, code string) *Refusal {
	t.Helper()
	var r *Refusal
	require.ErrorAs(t, err, &r, "error %v is not a *Refusal", err)
	require.Equal(t, code, r.Code, "code = %s (%s), want %s", r.Code, r.Message, code)
	require.Equal(t, code, failure.CodeOf(err), "failure.CodeOf = %s, want %s", failure.CodeOf(err), code)
	return r
}

func TestRegistryResolve(t *testing.T) {
	t.Parallel()
	b := setup(t)
	tpl := `Hi {{ context.user.displayName }} <{{context.user.email}}> of {{ context.tenantName }}, ` +
		`{{ context.today }}: run {{ run.id }} of {{ workflow.key }} by {{ agent.name }}. \{{ literal }} {{ item.id }}`
	req := request()
	req.Values = map[string]string{"item.id": "{{ run.id }}"}
	got, err := b.reg.Resolve(context.Background(), tpl, req)
	require.NoError(t, err)
	want := `Hi Ada Lovelace <ada@example.com> of Acme, 2026-03-09: run run-42 of invoice-intake by Support triage. {{ literal }} {{ run.id }}`
	require.Equal(t, want, got, "got  %q\nwant %q", got, want)
	// Each source is called once with its keys in first-seen order.
	assert.Equal(t, [][]string{{KeyUserDisplayName, KeyUserEmail, KeyTenantName, KeyToday}}, b.ctxSrc.calls, "context calls = %q", b.ctxSrc.calls)
	assert.Equal(t, [][]string{{KeyRunID, KeyWorkflowKey}}, b.runSrc.calls, "run calls = %q", b.runSrc.calls)
	assert.Equal(t, [][]string{{KeyAgentName}}, b.agSrc.calls, "agent calls = %q", b.agSrc.calls)
}

func TestRegistryResolveNoTokensCallsNoSource(t *testing.T) {
	t.Parallel()
	b := setup(t)
	got, err := b.reg.Resolve(context.Background(), `plain \{{ text }}`, Request{})
	require.NoError(t, err, "got %q,", got)
	require.Equal(t, "plain {{ text }}", got, "got %q, %v", got, err)
	require.Equal(t, 0, b.sourceCalls(), "a source was called for a template without tokens")
}

func TestRegistryValuesTakePrecedence(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := request()
	req.Permissions = nil                                                                 // agent.name would need agents.read ...
	req.Bindings = nil                                                                    // ... and agentId,
	req.Values = map[string]string{KeyAgentName: "Mine", KeyToday: "{{ context.today }}"} // but the caller owns them.
	got, err := b.reg.Resolve(context.Background(), "{{ agent.name }} {{ context.today }}", req)
	require.NoError(t, err)
	require.Equal(t, "Mine {{ context.today }}", got, "got %q", got)
	require.Equal(t, 0, b.sourceCalls(), "a source was called for caller-owned values")
}

func TestRegistryDefaults(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := Request{TenantID: "tenant-a", Actor: Actor{Sub: "u-1"}, Today: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)}
	got, err := b.reg.Resolve(context.Background(), "{{context.tenantName}}|{{context.user.displayName}}|{{context.user.email}}|{{context.today}}", req)
	require.NoError(t, err)
	require.Equal(t, "tenant-a|u-1||2026-01-02", got, "got %q", got)
}

func TestRegistryRefusals(t *testing.T) {
	t.Parallel()
	secret := "pq: password authentication failed for user weft at 10.0.0.7"
	cases := []struct {
		name      string
		template  string
		edit      func(*Request)
		ctx       func(t *testing.T) context.Context
		code      string
		keys      []string
		scopes    []string
		bindings  []string
		noSources bool // no source may have run
		agentCall bool // the agent lookup ran
	}{
		{name: "unknown key", template: "{{ context.today }} {{ nope }} {{ agent.name }} {{ also.nope }}",
			code: CodeUnknownVariable, keys: []string{"nope", "also.nope"}, noSources: true},
		{name: "invalid token is unknown", template: "{{ run.id }} {{ not a key! }}",
			code: CodeUnknownVariable, keys: []string{"not a key!"}, noSources: true},
		{name: "proto key never resolves", template: "{{ __proto__ }}",
			code: CodeUnknownVariable, keys: []string{"__proto__"}, noSources: true},
		{name: "toString never resolves", template: "{{ toString }}{{ constructor }}",
			code: CodeUnknownVariable, keys: []string{"toString", "constructor"}, noSources: true},
		{name: "missing scope", template: "{{ context.today }} {{ agent.name }}",
			edit: func(r *Request) { r.Permissions = []string{"runs.execute"} },
			code: CodeMissingScope, keys: []string{KeyAgentName}, scopes: []string{ScopeAgentsRead}, noSources: true},
		{name: "missing binding", template: "{{ context.today }} {{ agent.name }}",
			edit: func(r *Request) { r.Bindings = map[string]string{"other": "x"} },
			code: CodeMissingBinding, keys: []string{KeyAgentName}, bindings: []string{BindingAgentID}, noSources: true},
		{name: "empty binding", template: "{{ agent.name }}",
			edit: func(r *Request) { r.Bindings = map[string]string{BindingAgentID: ""} },
			code: CodeMissingBinding, keys: []string{KeyAgentName}, bindings: []string{BindingAgentID}, noSources: true},
		{name: "cancelled before sources", template: "{{ context.today }}",
			ctx: func(*testing.T) context.Context {
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				return ctx
			},
			code: CodeCancelled, keys: []string{KeyToday}, noSources: true},
		{name: "deadline exceeded", template: "{{ run.id }}",
			ctx: func(t *testing.T) context.Context {
				ctx, cancel := context.WithDeadline(context.Background(), time.Unix(0, 0))
				t.Cleanup(cancel)
				return ctx
			},
			code: CodeCancelled, keys: []string{KeyRunID}, noSources: true},
		{name: "record not found", template: "{{ agent.name }}",
			edit: func(r *Request) { r.Bindings[BindingAgentID] = "ghost" },
			code: CodeRecordNotFound, keys: []string{KeyAgentName}, agentCall: true},
		{name: "cross-tenant binding", template: "{{ context.today }} {{ agent.name }}",
			edit: func(r *Request) { r.Bindings[BindingAgentID] = "sales-bot" }, // tenant-b's agent
			code: CodeRecordNotFound, keys: []string{KeyAgentName}, agentCall: true},
		{name: "run variable outside a run", template: "{{ workflow.key }} {{ run.id }}",
			edit: func(r *Request) { r.RunID = "" },
			code: CodeRecordNotFound, keys: []string{KeyWorkflowKey, KeyRunID}},
		{name: "source failure without today", template: "{{ context.today }}",
			edit: func(r *Request) { r.Today = time.Time{} },
			code: CodeSourceFailed, keys: []string{KeyToday}},
		{name: "source failure without tenant", template: "{{ agent.name }}",
			edit: func(r *Request) { r.TenantID = "" },
			code: CodeSourceFailed, keys: []string{KeyAgentName}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t)
			req := request()
			if c.edit != nil {
				c.edit(&req)
			}
			ctx := context.Background()
			if c.ctx != nil {
				ctx = c.ctx(t)
			}
			out, err := b.reg.Resolve(ctx, c.template, req)
			assert.Empty(t, out, "refused resolution returned text %q", out)
			r := refusal(t, err, c.code)
			assert.Equal(t, c.keys, r.Keys, "keys = %q, want %q", r.Keys, c.keys)
			assert.Equal(t, c.scopes, r.Scopes, "scopes = %q, want %q", r.Scopes, c.scopes)
			assert.Equal(t, c.bindings, r.Bindings, "bindings = %q, want %q", r.Bindings, c.bindings)
			assert.False(t, c.noSources && b.sourceCalls() != 0, "a source ran before the refusal")
			assert.Equal(t, b.agents.calls.Load() > 0, c.agentCall, "agent lookup calls = %d", b.agents.calls.Load())
			assert.False(t, r.Message == "" || !strings.HasPrefix(r.Error(), c.code+": "), "Error() = %q", r.Error())
			for _, leak := range []string{secret, "tenant-b", "Sales assistant", "tenant-a", "ghost"} {
				assert.False(t, strings.Contains(r.Error(), leak) || strings.Contains(r.AsFailure().Message, leak), "refusal text %q leaks %q", r.Error(), leak)
			}
		})
	}
}

func TestRegistrySourceFailureIsGeneric(t *testing.T) {
	t.Parallel()
	secret := errors.New("pq: password authentication failed for user weft at 10.0.0.7")
	failing := NewSource([]Definition{{Key: "party.name", Label: "Party", Kind: KindText}},
		func(context.Context, Request, []string) (map[string]string, error) { return nil, secret })
	panicking := NewSource([]Definition{{Key: "party.crash", Label: "Crash", Kind: KindText}},
		func(context.Context, Request, []string) (map[string]string, error) { panic("boom: " + secret.Error()) })
	short := NewSource([]Definition{{Key: "party.short", Label: "Short", Kind: KindText}},
		func(context.Context, Request, []string) (map[string]string, error) { return map[string]string{}, nil })
	reg, err := NewRegistry(failing, panicking, short)
	require.NoError(t, err)
	for _, tpl := range []string{"{{ party.name }}", "{{ party.crash }}", "{{ party.short }}"} {
		_, err := reg.Resolve(context.Background(), tpl, request())
		r := refusal(t, err, CodeSourceFailed)
		fe := r.AsFailure()
		for _, text := range []string{r.Error(), r.Message, fe.Message, fmt.Sprint(fe.Details)} {
			assert.False(t, strings.Contains(text, "password") || strings.Contains(text, "boom") || strings.Contains(text, "no value"), "%s: client-visible text leaks the cause: %q", tpl, text)
		}
		assert.False(t, r.Unwrap() == nil || fe.Err == nil, "%s: internal cause lost", tpl)
		assert.True(t, r.Retryable(), "%s: a source failure should be retryable", tpl)
	}
	_, err = reg.Resolve(context.Background(), "{{ party.name }}", request())
	assert.ErrorIs(t, err, secret, "the cause must stay reachable through Unwrap for logs")
}

func TestRegistryCancelledDuringSource(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var second atomic.Bool
	first := NewSource([]Definition{{Key: "slow.value", Label: "Slow", Kind: KindText}},
		func(ctx context.Context, _ Request, _ []string) (map[string]string, error) {
			cancel()
			<-ctx.Done()
			return nil, fmt.Errorf("query aborted: %w", ctx.Err())
		})
	after := NewSource([]Definition{{Key: "next.value", Label: "Next", Kind: KindText}},
		func(context.Context, Request, []string) (map[string]string, error) {
			second.Store(true)
			return map[string]string{"next.value": "x"}, nil
		})
	reg, err := NewRegistry(first, after)
	require.NoError(t, err)
	_, err = reg.Resolve(ctx, "{{ slow.value }}{{ next.value }}", request())
	r := refusal(t, err, CodeCancelled)
	assert.False(t, r.Retryable(), "CANCELLED must not be retryable")
	assert.ErrorIs(t, err, context.Canceled, "cause should carry context.Canceled")
	assert.False(t, second.Load(), "a source ran after cancellation")

	// A source that succeeds as the context ends still counts as cancelled
	// for the next source.
	ctx2, cancel2 := context.WithCancel(context.Background())
	quick := NewSource([]Definition{{Key: "quick.value", Label: "Quick", Kind: KindText}},
		func(context.Context, Request, []string) (map[string]string, error) {
			cancel2()
			return map[string]string{"quick.value": "q"}, nil
		})
	reg2, err := NewRegistry(quick, after)
	require.NoError(t, err)
	_, err = reg2.Resolve(ctx2, "{{ quick.value }}{{ next.value }}", request())
	r = refusal(t, err, CodeCancelled)
	assert.Equal(t, []string{"next.value"}, r.Keys, "keys = %q", r.Keys)
	assert.False(t, second.Load(), "a source ran after cancellation")
}

func TestRegistryValidatesBeforeAnySource(t *testing.T) {
	t.Parallel()
	// The first key is fine and owned by the first source; a later key is
	// bad. No source may run, whatever the order.
	for _, tc := range []struct{ tpl, code string }{
		{"{{ context.today }} {{ run.id }} {{ agent.name }} {{ unknown.key }}", CodeUnknownVariable},
		{"{{ context.today }} {{ run.id }} {{ agent.name }}", CodeMissingScope},
	} {
		b := setup(t)
		req := request()
		req.Permissions = nil
		_, err := b.reg.Resolve(context.Background(), tc.tpl, req)
		refusal(t, err, tc.code)
		assert.Equal(t, 0, b.sourceCalls(), "%q: a source ran before validation finished", tc.tpl)
	}
}

func TestRefusalAsFailure(t *testing.T) {
	t.Parallel()
	b := setup(t)
	req := request()
	req.Permissions = nil
	_, err := b.reg.Resolve(context.Background(), "{{ agent.name }}", req)
	var fe *failure.Error
	require.ErrorAs(t, fmt.Errorf("wrapped: %w", err), &fe, "errors.As to *failure.Error failed")
	require.Equal(t, failure.CodeMissingScope, fe.Code, "failure = %+v", fe)
	require.NotEmpty(t, fe.Message, "failure = %+v", fe)
	want := map[string]any{"keys": []string{KeyAgentName}, "scopes": []string{ScopeAgentsRead}}
	require.Equal(t, want, fe.Details, "details = %v, want %v", fe.Details, want)
	var r *Refusal
	require.ErrorAs(t, err, &r, "MISSING_SCOPE must be a non-retryable *Refusal")
	require.False(t, r.Retryable(), "MISSING_SCOPE must be a non-retryable *Refusal")
}

func TestNewRegistryRejects(t *testing.T) {
	t.Parallel()
	noop := func(context.Context, Request, []string) (map[string]string, error) { return nil, nil }
	src := func(d Definition) Source { return NewSource([]Definition{d}, noop) }
	good := Definition{Key: "a.b", Label: "AB", Kind: KindText}
	cases := map[string][]Source{
		"bad key":       {src(Definition{Key: "A.b", Label: "x", Kind: KindText})},
		"proto key":     {src(Definition{Key: "__proto__", Label: "x", Kind: KindText})},
		"no label":      {src(Definition{Key: "a", Kind: KindText})},
		"bad kind":      {src(Definition{Key: "a", Label: "x", Kind: "string"})},
		"bad binding":   {src(Definition{Key: "a", Label: "x", Kind: KindText, RequiredBindings: []string{"agent_id"}})},
		"duplicate key": {src(good), src(good)},
		"nil source":    {nil},
		"builtin twice": {ContextSource(), ContextSource()},
	}
	for name, sources := range cases {
		_, err := NewRegistry(sources...)
		assert.Error(t, err, "%s: NewRegistry accepted it", name)
	}
	_, err := NewRegistry()
	assert.NoError(t, err, "an empty registry is valid")
}

func TestRegistryList(t *testing.T) {
	t.Parallel()
	b := setup(t)
	keys := func(defs []Definition) []string {
		out := []string{}
		for _, d := range defs {
			out = append(out, d.Key)
		}
		return out
	}
	scopeless := []string{KeyTenantName, KeyToday, KeyUserDisplayName, KeyUserEmail, KeyRunID, KeyWorkflowKey}
	for _, scopes := range [][]string{nil, {}, {"runs.read"}} {
		got := keys(b.reg.List(scopes))
		assert.Equal(t, sorted(scopeless), got, "List(%q) = %q", scopes, got)
	}
	all := sorted(append(append([]string{}, scopeless...), KeyAgentName))
	got := keys(b.reg.List([]string{ScopeAgentsRead}))
	assert.Equal(t, all, got, "List(agents.read) = %q", got)
	got = keys(b.reg.Definitions())
	assert.Equal(t, all, got, "Definitions() = %q", got)
	// The returned definitions are copies.
	list := b.reg.List([]string{ScopeAgentsRead})
	for i := range list {
		if list[i].Key == KeyAgentName {
			list[i].RequiredBindings[0] = "tampered"
		}
	}
	d, ok := b.reg.Lookup(KeyAgentName)
	assert.False(t, !ok || !reflect.DeepEqual(d.RequiredBindings, []string{BindingAgentID}) || d.Scope != ScopeAgentsRead || d.Kind != KindText, "Lookup(agent.name) = %+v, %v", d, ok)
	_, ok = b.reg.Lookup("nope")
	assert.False(t, ok, "Lookup(nope) found something")
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func TestGraphHelpers(t *testing.T) {
	t.Parallel()
	defs := setup(t).reg.Definitions()
	cases := []struct {
		name     string
		template string
		bindings map[string]string
		unknown  []string
		scopes   []string
		missing  []string
	}{
		{name: "bound item and registered context", template: "Item {{ item.id }} on {{ context.today }}",
			bindings: map[string]string{"item.id": "/in/id"}, unknown: []string{}, scopes: []string{}, missing: []string{}},
		{name: "unbound item", template: "Item {{ item.id }} {{ bad key }}",
			unknown: []string{"item.id", "bad key"}, scopes: []string{}, missing: []string{}},
		{name: "agent with binding", template: "{{ agent.name }}",
			bindings: map[string]string{"agentId": "/in/agent"}, unknown: []string{}, scopes: []string{ScopeAgentsRead}, missing: []string{}},
		{name: "agent without binding", template: "{{ agent.name }}",
			unknown: []string{}, scopes: []string{ScopeAgentsRead}, missing: []string{BindingAgentID}},
		{name: "agent bound explicitly needs no scope", template: "{{ agent.name }}",
			bindings: map[string]string{"agent.name": "/in/name"}, unknown: []string{}, scopes: []string{}, missing: []string{}},
		{name: "binding name used as a key", template: "{{ agentId }}",
			bindings: map[string]string{"agentId": "/in/agent"}, unknown: []string{}, scopes: []string{}, missing: []string{}},
		{name: "escaped token is not a variable", template: `\{{ nope }}`,
			unknown: []string{}, scopes: []string{}, missing: []string{}},
		{name: "prototype names", template: "{{ toString }}{{ __proto__ }}",
			unknown: []string{"toString", "__proto__"}, scopes: []string{}, missing: []string{}},
	}
	for _, c := range cases {
		got := Check(c.template, c.bindings, defs)
		assert.Equal(t, c.unknown, got, "%s: Check = %q, want %q", c.name, got, c.unknown)
		got = Scopes(c.template, c.bindings, defs)
		assert.Equal(t, c.scopes, got, "%s: Scopes = %q, want %q", c.name, got, c.scopes)
		got = MissingBindings(c.template, c.bindings, defs)
		assert.Equal(t, c.missing, got, "%s: MissingBindings = %q, want %q", c.name, got, c.missing)
	}
}

func TestRegistryConcurrent(t *testing.T) {
	t.Parallel()
	b := setup(t)
	var wg sync.WaitGroup
	for i := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			req := request()
			if i%2 == 1 {
				req.TenantID = "tenant-b"
				req.Bindings = map[string]string{BindingAgentID: "sales-bot"}
			}
			got, err := b.reg.Resolve(context.Background(), "{{ agent.name }}", req)
			want := map[bool]string{false: "Support triage", true: "Sales assistant"}[i%2 == 1]
			if err != nil || got != want {
				t.Errorf("goroutine %d: %q, %v", i, got, err)
			}
		}()
	}
	wg.Wait()
}

func TestRefusalMessageIsBounded(t *testing.T) {
	t.Parallel()
	reg, err := NewRegistry()
	require.NoError(t, err)
	var b strings.Builder
	for i := range 25 {
		fmt.Fprintf(&b, "{{ k%d }}", i)
	}
	_, err = reg.Resolve(context.Background(), b.String(), Request{})
	r := refusal(t, err, CodeUnknownVariable)
	require.Len(t, r.Keys, 25, "keys %d, message %q", len(r.Keys), r.Message)
	require.True(t, strings.HasSuffix(r.Message, `"k9", and 15 more`), "keys %d, message %q", len(r.Keys), r.Message)
}
