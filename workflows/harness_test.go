package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// parsePlan builds a graph.Plan from a compact description, one node per
// line in compiled order:
//
//	id kind [inPort=node.port ...] [retry=max,initialMs,backoff,maxMs] [timeout=ms] [risk=read]
//
// risk=read makes an action node ReadOnly, as Compiled.Plan does for an
// action whose risk is read.
// Output ports follow from the kind; their targets from the other lines.
func parsePlan(t testing.TB, desc string) graph.Plan {
	t.Helper()
	plan := graph.Plan{Checksum: "sha256-test"}
	for _, line := range strings.Split(strings.TrimSpace(desc), "\n") {
		f := strings.Fields(line)
		if len(f) == 0 {
			continue
		}
		require.GreaterOrEqual(t, len(f), 2, "line %q", line)
		n := graph.PlanNode{
			ID: f[0], Kind: graph.Kind(f[1]), Index: len(plan.Nodes),
			Retry:     graph.Retry{MaxAttempts: 1, InitialIntervalMs: 1000, Backoff: 2},
			TimeoutMs: 30000,
			Summary:   f[0] + " · " + f[1],
		}
		for _, arg := range f[2:] {
			k, v, ok := strings.Cut(arg, "=")
			require.True(t, ok, "argument %q", arg)
			switch k {
			case "retry":
				p := strings.Split(v, ",")
				require.Len(t, p, 4, "retry %q", v)
				n.Retry.MaxAttempts, _ = strconv.Atoi(p[0])
				n.Retry.InitialIntervalMs, _ = strconv.Atoi(p[1])
				n.Retry.Backoff, _ = strconv.ParseFloat(p[2], 64)
				n.Retry.MaxIntervalMs, _ = strconv.Atoi(p[3])
			case "timeout":
				n.TimeoutMs, _ = strconv.Atoi(v)
			case "risk":
				n.ReadOnly = v == string(graph.RiskRead)
			default:
				node, port, ok := strings.Cut(v, ".")
				require.True(t, ok, "source %q", v)
				n.Inputs = append(n.Inputs, graph.PlanInput{Port: k, FromNode: node, FromPort: port})
			}
		}
		sort.Slice(n.Inputs, func(a, b int) bool { return n.Inputs[a].Port < n.Inputs[b].Port })
		for _, port := range outputPorts(n.Kind) {
			n.Outputs = append(n.Outputs, graph.PlanOutput{Port: port})
		}
		plan.Nodes = append(plan.Nodes, n)
	}
	for _, target := range plan.Nodes {
		for _, in := range target.Inputs {
			found := false
			for k := range plan.Nodes {
				src := &plan.Nodes[k]
				for o := range src.Outputs {
					if src.ID == in.FromNode && src.Outputs[o].Port == in.FromPort {
						src.Outputs[o].To = append(src.Outputs[o].To, graph.PortRef{Node: target.ID, Port: in.Port})
						found = true
					}
				}
			}
			require.True(t, found, "%s.%s feeds nothing known", in.FromNode, in.FromPort)
		}
	}
	for k := range plan.Nodes {
		for _, o := range plan.Nodes[k].Outputs {
			sort.Slice(o.To, func(a, b int) bool {
				return o.To[a].Node+"."+o.To[a].Port < o.To[b].Node+"."+o.To[b].Port
			})
		}
	}
	return plan
}

func outputPorts(k graph.Kind) []string {
	switch k {
	case graph.KindOutput:
		return nil
	case graph.KindGate, graph.KindValidator, graph.KindAgentDecision:
		return []string{"fail", "pass"}
	case graph.KindApproval:
		return []string{graph.PortApproved, graph.PortRejected, graph.PortTimedOut}
	default:
		return []string{"out"}
	}
}

// step is what a fake node does on one attempt (the last one repeats).
type step struct {
	port       string        // fired port; default by kind
	value      string        // JSON value; default echoes the input (merge: object by port)
	fail       string        // ApplicationError type: the attempt fails with it
	permanent  bool          // the failure is non-retryable
	wait       time.Duration // real time the attempt takes
	block      bool          // heartbeat until cancelled, then acknowledge
	late       bool          // heartbeat until cancelled, then return a result anyway
	hang       bool          // heartbeat and ignore cancellation until the test releases it
	durationMs int64         // simulated duration
	// lose makes the attempt's first loseTimes dispatches (1 when 0) end
	// in an infrastructure fault: execution.InfraLeaseLost stalls without
	// heartbeating until the lease lapses, an infra error type
	// (WORKER_DRAINED, ...) is returned as such. Later dispatches play the
	// rest of the step.
	lose      string
	loseTimes int
	// ask makes an agent attempt stop before tool call ask (an ordinal)
	// for approval, unless NodeInput.Approval decides that call: then
	// the attempt records the decision (fakes.toolDecisions) and plays the
	// rest of the step.
	ask int
	// thenAsk makes the attempt, resumed with the decision on call ask,
	// stop again before call thenAsk (a second request of one attempt).
	thenAsk int
}

// fakes are the activities, registered by name, driven by a step table.
type fakes struct {
	plan    graph.Plan
	steps   map[string][]step
	release chan struct{}

	mu       sync.Mutex
	keys     map[string]int // event keys appended, to the ordinal of the event each names
	ordinals []int          // per appended event (appends' order), its ordinal
	appends  []execution.AppendEventsInput
	sources  []string               // per append: "flush" or "carried"
	batches  []execution.EventBatch // what attempts carried, in order
	// forms: per carried batch, "compact" (NodeInput.Carried) or "plain"
	// (NodeInput.Events); previousRelease makes runNode decode inputs as a
	// worker of the release before version 6 does, blind to Carried.
	forms           []string
	previousRelease bool
	// carriers: per carried batch, the node whose attempt carried it.
	carriers []string
	// vouched is the store's runs.events_through (migration 00026): the
	// ordinal through which carried appends vouched for the whole log; a
	// suffix (NodeInput.Suffix) after a later ordinal is refused. With
	// answerEarly, attempts confirm only what earlier carriers appended,
	// as a read action that answers before its own append commits.
	vouched     int
	answerEarly bool
	refused     int
	// lazyAppends and lazyAnswered count the lazily carried batches
	// (interpreter version 9) appended, and those whose attempt ended
	// before their time (runLazily).
	lazyAppends, lazyAnswered int
	// loseAppendOf names a node whose attempts' carried appends are lost
	// (the worker died after the attempt answered early): nothing logged.
	loseAppendOf string
	lean         int // lean inputs received
	// params are the run's parameters (wfTest.run, runOnDevServer): a
	// lean input (NodeInput.Lean) must name their tenant and run and hold
	// none of their constants, which an activity of this release reads
	// from the run's record (the fakes play nothing that reads them).
	params   *execution.RunParams
	inputs   []execution.NodeInput
	stored   []execution.StoreValuesInput
	problems []string

	// decisions are what LoadDecision finds, by decision id; identity is
	// what UpdateIdentity answers (identities: what it was asked);
	// toolDecisions what resumed agent attempts were given.
	decisions     map[string]execution.StoredDecision
	identity      string
	identities    []execution.UpdateIdentityInput
	toolDecisions []execution.ApprovalState
}

type activityRegistry interface {
	RegisterActivityWithOptions(a any, options activity.RegisterOptions)
}

func newFakes(t testing.TB, plan graph.Plan, steps map[string][]step) *fakes {
	f := &fakes{plan: plan, steps: steps, release: make(chan struct{})}
	t.Cleanup(f.releaseAll)
	return f
}

func (f *fakes) releaseAll() {
	select {
	case <-f.release:
	default:
		close(f.release)
	}
}

func (f *fakes) register(r activityRegistry) {
	r.RegisterActivityWithOptions(f.loadPlan, activity.RegisterOptions{Name: execution.ActivityLoadPlan})
	r.RegisterActivityWithOptions(f.appendEvents, activity.RegisterOptions{Name: execution.ActivityAppendEvents})
	r.RegisterActivityWithOptions(f.runNode, activity.RegisterOptions{Name: execution.ActivityRunNode})
	r.RegisterActivityWithOptions(f.runNode, activity.RegisterOptions{Name: execution.ActivityRunLocalNode})
	for _, k := range []graph.Kind{graph.KindGate, graph.KindValidator, graph.KindMerge, graph.KindAction, graph.KindAgent,
		graph.KindAgentDecision, graph.KindApproval} {
		name, _ := execution.NodeActivity(k)
		r.RegisterActivityWithOptions(f.runNode, activity.RegisterOptions{Name: name})
	}
	r.RegisterActivityWithOptions(f.storeValues, activity.RegisterOptions{Name: execution.ActivityStoreValues})
	r.RegisterActivityWithOptions(f.loadDecision, activity.RegisterOptions{Name: execution.ActivityLoadDecision})
	r.RegisterActivityWithOptions(f.updateIdentity, activity.RegisterOptions{Name: execution.ActivityUpdateIdentity})
}

// storeDecision is what weft's API does before it sends the update.
func (f *fakes) storeDecision(id string, d execution.StoredDecision) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.decisions == nil {
		f.decisions = map[string]execution.StoredDecision{}
	}
	d.Found = true
	f.decisions[id] = d
}

func (f *fakes) loadDecision(_ context.Context, in execution.LoadDecisionInput) (execution.StoredDecision, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.decisions[in.DecisionID], nil
}

func (f *fakes) updateIdentity(_ context.Context, in execution.UpdateIdentityInput) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.identities = append(f.identities, in)
	return f.identity, nil
}

// storeValues records what the interpreter claim-checks and returns a
// reference per value whose digest is "fake".
func (f *fakes) storeValues(_ context.Context, in execution.StoreValuesInput) (execution.StoreValuesResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stored = append(f.stored, in)
	out := execution.StoreValuesResult{Refs: []execution.ValueRef{}}
	for _, v := range in.Values {
		out.Refs = append(out.Refs, execution.ValueRef{NodeID: v.NodeID, Port: v.Port, SHA256: "fake", Size: len(v.Value)})
	}
	return out, nil
}

func (f *fakes) storedValues() []execution.StoreValuesInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]execution.StoreValuesInput(nil), f.stored...)
}

func (f *fakes) loadPlan(_ context.Context, in execution.LoadPlanInput) (graph.Plan, error) {
	if in.Checksum != f.plan.Checksum {
		return graph.Plan{}, temporal.NewNonRetryableApplicationError("no such plan", execution.ErrPlanNotFound, nil)
	}
	return f.plan, nil
}

// appendEvents keeps what the store would: events whose key it already
// holds are skipped (a batch carried by several activities, or flushed
// again before being confirmed, is appended once); an append that adds
// no event leaves no trace.
//
// Every append says the ordinal of its last event (Through), so the fake
// knows which event each draft is: a key it holds for another ordinal
// names two events, one of which the store would silently drop. That is
// a problem every test's checkLog reports (keyCollisions), so all the
// package's runs guard the key format.
func (f *fakes) appendEvents(_ context.Context, in execution.AppendEventsInput) error {
	f.appendFrom("flush", in)
	return nil
}

// appendFrom records an append by the flush local activity ("flush") or
// by an activity carrying the buffer ("carried").
func (f *fakes) appendFrom(source string, in execution.AppendEventsInput) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.keys == nil {
		f.keys = map[string]int{}
	}
	if in.Through < len(in.Events) {
		f.problems = append(f.problems, fmt.Sprintf("an append of %d events says its last is ordinal %d", len(in.Events), in.Through))
		return
	}
	fresh := in.Events[:0:0]
	first := in.Through - len(in.Events) + 1
	for k, e := range in.Events {
		ordinal := first + k
		held, ok := f.keys[e.Key]
		switch {
		case !ok:
			f.keys[e.Key] = ordinal
			f.ordinals = append(f.ordinals, ordinal)
			// As the store keeps it: a carried batch's compact form
			// (version 6) comes with no finer time than that.
			e.At = e.At.UTC().Truncate(time.Microsecond)
			fresh = append(fresh, e)
		case held != ordinal:
			f.problems = append(f.problems, fmt.Sprintf("key %s names events %d and %d (%s)", e.Key, held, ordinal, describe(e)))
		}
	}
	if len(fresh) == 0 {
		return // the run update came with these events before; it is idempotent
	}
	in.Events = fresh
	f.appends = append(f.appends, in)
	f.sources = append(f.sources, source)
}

// appendSources lists, per append, who made it.
func (f *fakes) appendSources() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.sources...)
}

func (f *fakes) problem(format string, args ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.problems = append(f.problems, fmt.Sprintf(format, args...))
}

// runNode checks that the attempt's node.started was appended before the
// attempt began (flush before schedule), then plays the step.
func (f *fakes) runNode(ctx context.Context, in execution.NodeInput) (execution.NodeResult, error) {
	// Like activities.withCarriedEvents: carried events are appended
	// first, in whichever form they came (NodeInput.CarriedEvents).
	f.mu.Lock()
	if in.Lean {
		p := f.params
		switch {
		case p == nil || !p.LeanInputs:
			f.problems = append(f.problems, fmt.Sprintf("attempt %s/%d: a lean input, which the run's parameters do not ask for", in.NodeID, in.Attempt))
		case in.TenantID != p.TenantID || in.RunID != p.RunID:
			f.problems = append(f.problems, fmt.Sprintf("attempt %s/%d: a lean input naming run %s/%s", in.NodeID, in.Attempt, in.TenantID, in.RunID))
		case in.WorkflowKey != "" || in.Checksum != "" || in.Mode != "" || in.Actor != (execution.Actor{}) || in.Permissions != nil || in.TenantName != "":
			f.problems = append(f.problems, fmt.Sprintf("attempt %s/%d: a lean input carrying constants", in.NodeID, in.Attempt))
		default:
			f.lean++
		}
	}
	if f.previousRelease {
		in.Carried, in.Suffix = nil, nil // unknown members to its decoder
	} else {
		if in.Suffix != nil || in.Carried != nil || in.Events != nil {
			f.carriers = append(f.carriers, in.NodeID)
		}
		switch {
		case in.Suffix != nil:
			f.forms = append(f.forms, "suffix")
		case in.Carried != nil:
			f.forms = append(f.forms, "compact")
		case in.Events != nil:
			f.forms = append(f.forms, "plain")
		}
	}
	f.mu.Unlock()
	b, err := in.CarriedEvents()
	if err != nil {
		f.problem("attempt %s/%d: %v", in.NodeID, in.Attempt, err)
		return execution.NodeResult{}, err
	}
	if b != nil && !in.CarryLazyUntil.IsZero() {
		return f.runLazily(ctx, in, b)
	}
	if b != nil {
		f.mu.Lock()
		f.batches = append(f.batches, *b)
		before := f.vouched
		gap := b.After > f.vouched
		lost := in.NodeID == f.loseAppendOf
		switch {
		case gap:
			f.refused++
		case !lost:
			f.vouched = max(f.vouched, b.Through)
		}
		f.mu.Unlock()
		if !gap && !lost && (len(b.Events) > 0 || b.Run != nil) {
			f.appendFrom("carried", execution.AppendEventsInput{TenantID: in.TenantID, RunID: in.RunID, Events: b.Events, Run: b.Run, Through: b.Through})
		}
		in.Events, in.Carried, in.Suffix = nil, nil, nil
		res, err := f.play(ctx, in)
		switch {
		case err != nil:
		case gap:
			res.EventsRefused = true
		case f.answerEarly || lost:
			res.EventsThrough = before
		default:
			res.EventsThrough = b.Through
		}
		return res, err
	}
	return f.play(ctx, in)
}

// runLazily is runNode for events carried lazily (interpreter version 9),
// like activities.carryLazily: the batch is appended only if the attempt
// still runs when its oldest event is deferMaxAge old. The test
// environment's workflow clock stands still while attempts run, so the
// wait is measured from the attempt's start, taken as the time of the
// batch's last event (the attempt's node.started). lazyAppends counts the
// lazy batches appended, lazyAnswered those whose attempt ended first.
func (f *fakes) runLazily(ctx context.Context, in execution.NodeInput, b *execution.EventBatch) (execution.NodeResult, error) {
	wait := time.Duration(0)
	if len(b.Events) > 0 {
		wait = in.CarryLazyUntil.Sub(b.Events[len(b.Events)-1].At)
	}
	in.Events, in.Carried, in.Suffix = nil, nil, nil
	type outcome struct {
		res execution.NodeResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := f.play(ctx, in)
		done <- outcome{res, err}
	}()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case o := <-done:
		f.mu.Lock()
		f.lazyAnswered++
		before := f.vouched
		f.mu.Unlock()
		if o.err == nil {
			o.res.EventsThrough = min(before, b.Through)
		}
		return o.res, o.err
	case <-t.C:
	}
	f.mu.Lock()
	f.batches = append(f.batches, *b)
	f.lazyAppends++
	gap := b.After > f.vouched
	if gap {
		f.refused++
	} else {
		f.vouched = max(f.vouched, b.Through)
	}
	f.mu.Unlock()
	if !gap && (len(b.Events) > 0 || b.Run != nil) {
		f.appendFrom("lazy", execution.AppendEventsInput{TenantID: in.TenantID, RunID: in.RunID, Events: b.Events, Run: b.Run, Through: b.Through})
	}
	o := <-done
	switch {
	case o.err != nil:
	case gap:
		o.res.EventsRefused = true
	default:
		o.res.EventsThrough = b.Through
	}
	return o.res, o.err
}

// readOnly says whether the plan marks the node ReadOnly (risk=read).
func (f *fakes) readOnly(nodeID string) bool {
	for _, n := range f.plan.Nodes {
		if n.ID == nodeID {
			return n.ReadOnly
		}
	}
	return false
}

func (f *fakes) play(ctx context.Context, in execution.NodeInput) (execution.NodeResult, error) {
	f.mu.Lock()
	f.inputs = append(f.inputs, in)
	announced := false
	for _, a := range f.appends {
		for _, e := range a.Events {
			announced = announced || (e.Type == execution.EventNodeStarted && e.NodeID == in.NodeID && e.Attempt == in.Attempt)
		}
	}
	f.mu.Unlock()
	// A regular attempt's node.started is in the log before it runs
	// (flushed, or carried and appended first). A local attempt runs
	// inside the workflow task that decided it, so from interpreter
	// version 2 its events may follow with the next append: it has no
	// effect outside the workflow before then. A re-dispatch may follow a
	// continue-as-new. From version 8 a read-only action's attempt (no
	// side effects) may run before its node.started is appended.
	local := in.Kind == graph.KindGate || in.Kind == graph.KindValidator || in.Kind == graph.KindMerge || in.Kind == graph.KindApproval
	if !announced && in.Redispatch == 0 && !local && !f.readOnly(in.NodeID) {
		f.problem("%s attempt %d began before its node.started was appended", in.NodeID, in.Attempt)
	}

	s := f.stepFor(in.NodeID, in.Attempt)
	if s.ask > 0 {
		ask := func(call int) (execution.NodeResult, error) {
			return execution.NodeResult{Approval: &execution.ApprovalRequest{TimeoutMs: 5000,
				Call: execution.ApprovalCall{Ordinal: call, Turn: 1, Tool: "workspace.notes.write@1", Input: json.RawMessage(`{"title":"t"}`), InputBytes: 13}}}, nil
		}
		d := in.Approval
		if d == nil || d.Call == nil || (d.Call.Ordinal != s.ask && (s.thenAsk == 0 || d.Call.Ordinal != s.thenAsk)) {
			return ask(s.ask)
		}
		f.mu.Lock()
		f.toolDecisions = append(f.toolDecisions, *in.Approval)
		f.mu.Unlock()
		if d.Call.Ordinal == s.ask && s.thenAsk > 0 {
			return ask(s.thenAsk)
		}
	}
	if s.lose != "" && in.Redispatch < max(s.loseTimes, 1) {
		if s.lose == execution.InfraLeaseLost {
			// Like a killed worker: no heartbeat, no answer that counts.
			// Temporal times the attempt out after the lease; this
			// goroutine's late return is discarded.
			select {
			case <-time.After(3 * activity.GetInfo(ctx).HeartbeatTimeout):
			case <-f.release:
			}
			return execution.NodeResult{}, errors.New("answer after the lease was lost")
		}
		return execution.NodeResult{}, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("%s attempt %d dispatch %d: %s", in.NodeID, in.Attempt, in.Redispatch, s.lose), s.lose, nil)
	}
	if s.wait > 0 {
		select {
		case <-time.After(s.wait):
		case <-ctx.Done():
			return execution.NodeResult{}, ctx.Err()
		}
	}
	switch {
	case s.block:
		if err := heartbeatUntil(ctx, ctx.Done()); err != nil {
			return execution.NodeResult{}, err
		}
		return execution.NodeResult{}, ctx.Err()
	case s.late:
		if err := heartbeatUntil(ctx, ctx.Done()); err != nil {
			return execution.NodeResult{}, err
		}
	case s.hang:
		_ = heartbeatUntil(ctx, f.release)
	}
	if s.fail != "" {
		return execution.NodeResult{}, temporal.NewApplicationErrorWithOptions(
			fmt.Sprintf("%s attempt %d failed", in.NodeID, in.Attempt), s.fail,
			temporal.ApplicationErrorOptions{NonRetryable: s.permanent, Details: []any{execution.FailureDetails{DurationMs: s.durationMs}}})
	}
	res := defaultResult(in)
	if s.port != "" {
		res.Port = s.port
	}
	if s.value != "" {
		res.Value = execution.Value{Inline: json.RawMessage(s.value)}
	}
	res.DurationMs = s.durationMs
	return res, nil
}

// heartbeatUntil heartbeats (so Temporal can deliver a cancellation) until done closes.
func heartbeatUntil(ctx context.Context, done <-chan struct{}) error {
	for {
		activity.RecordHeartbeat(ctx)
		select {
		case <-done:
			return nil
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func (f *fakes) stepFor(nodeID string, attempt int) step {
	steps := f.steps[nodeID]
	if len(steps) == 0 {
		return step{}
	}
	return steps[min(attempt, len(steps))-1]
}

func defaultResult(in execution.NodeInput) execution.NodeResult {
	switch in.Kind {
	case graph.KindMerge:
		obj := map[string]json.RawMessage{}
		for port, v := range in.Inputs {
			obj[port] = v.Inline
		}
		raw, _ := json.Marshal(obj)
		return execution.NodeResult{Port: "out", Value: execution.Value{Inline: raw}}
	case graph.KindGate, graph.KindValidator, graph.KindAgentDecision:
		return execution.NodeResult{Port: "pass", Value: in.Inputs["in"]}
	case graph.KindApproval: // a simulated approval without a fixture
		return execution.NodeResult{Port: graph.PortApproved}
	default:
		return execution.NodeResult{Port: "out", Value: in.Inputs["in"]}
	}
}

// events returns every appended event in order.
func (f *fakes) events() []execution.EventDraft {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []execution.EventDraft
	for _, a := range f.appends {
		out = append(out, a.Events...)
	}
	return out
}

// flushes describes the appended events with "--" between flushes.
func (f *fakes) flushes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for k, a := range f.appends {
		if k > 0 {
			out = append(out, "--")
		}
		for _, e := range a.Events {
			out = append(out, describe(e))
		}
	}
	return out
}

func (f *fakes) nodeInputs(nodeID string) []execution.NodeInput {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []execution.NodeInput
	for _, in := range f.inputs {
		if in.NodeID == nodeID {
			out = append(out, in)
		}
	}
	return out
}

// describe renders an event for sequence assertions: type, node (#attempt
// when > 1), edge ends, skip reason.
func describe(e execution.EventDraft) string {
	var d execution.EventData
	_ = json.Unmarshal(e.Data, &d)
	switch {
	case strings.HasPrefix(e.Type, "edge."):
		return e.Type + " " + d.From + ">" + d.To
	case e.Type == execution.EventNodeSkipped:
		return e.Type + " " + e.NodeID + " " + d.Reason
	case e.NodeID != "":
		s := e.Type + " " + e.NodeID
		if e.Attempt > 1 {
			s += fmt.Sprintf("#%d", e.Attempt)
		}
		return s
	default:
		return e.Type
	}
}

func eventData(t testing.TB, e execution.EventDraft) execution.EventData {
	t.Helper()
	var d execution.EventData
	require.NoError(t, json.Unmarshal(e.Data, &d), "event %s data %s", e.Key, e.Data)
	return d
}

func findEvent(t testing.TB, events []execution.EventDraft, typ, nodeID string, attempt int) execution.EventDraft {
	t.Helper()
	for _, e := range events {
		if e.Type == typ && e.NodeID == nodeID && e.Attempt == attempt {
			return e
		}
	}
	require.Failf(t, "event not found", "%s %s#%d", typ, nodeID, attempt)
	return execution.EventDraft{}
}

// checkLog asserts what must hold for every run's appends: no key naming
// two events, every ordinal from firstOrdinal appended once and in order
// (nothing dropped), keys that name their event, non-decreasing At, the
// run update on the first and last flush, one terminal event, last.
func checkLog(t testing.TB, f *fakes, runID string, firstOrdinal int, wantStatus string) {
	t.Helper()
	f.mu.Lock()
	appends := append([]execution.AppendEventsInput(nil), f.appends...)
	ordinals := append([]int(nil), f.ordinals...)
	problems := append([]string(nil), f.problems...)
	f.mu.Unlock()
	require.Empty(t, problems)
	require.NotEmpty(t, appends)

	seen := map[string]bool{}
	ordinal := firstOrdinal
	var last time.Time
	var all []execution.EventDraft
	for _, a := range appends {
		require.Equal(t, runID, a.RunID)
		for _, e := range a.Events {
			require.Equal(t, ordinal, ordinals[len(all)], "event %s is not the next one recorded", e.Key)
			all = append(all, e)
			require.False(t, seen[e.Key], "duplicate key %s", e.Key)
			seen[e.Key] = true
			require.Equal(t, expectedKey(t, runID, e), e.Key)
			require.False(t, e.At.Before(last), "event %s goes back in time", e.Key)
			require.True(t, json.Valid(e.Data), "event %s data", e.Key)
			last = e.At
			ordinal++
		}
	}
	if firstOrdinal == 1 {
		require.NotNil(t, appends[0].Run)
		if len(appends) > 1 {
			require.Equal(t, execution.StatusRunning, appends[0].Run.Status)
		} // else the run ran no activity and its one append also ended it
		require.Equal(t, execution.EventRunStarted, all[0].Type)
	}
	terminal := map[string]string{
		execution.EventRunSucceeded: execution.StatusSucceeded,
		execution.EventRunFailed:    execution.StatusFailed,
		execution.EventRunCancelled: execution.StatusCancelled,
		execution.EventRunContinued: "",
	}
	for k, e := range all {
		if _, ok := terminal[e.Type]; ok && e.Type != execution.EventRunContinued {
			require.Equal(t, len(all)-1, k, "%s is not the last event", e.Type)
		}
	}
	for _, a := range appends {
		for k, e := range a.Events {
			if e.Type == execution.EventRunContinued {
				require.Equal(t, len(a.Events)-1, k, "run.continued is not the last event of its execution")
			}
		}
	}
	end := all[len(all)-1]
	status, ok := terminal[end.Type]
	require.True(t, ok, "last event %s is not terminal", end.Type)
	require.Equal(t, wantStatus, status)
	if status != "" {
		lastAppend := appends[len(appends)-1]
		require.NotNil(t, lastAppend.Run)
		require.Equal(t, status, lastAppend.Run.Status)
	}
}

// expectedKey is an event's version 4 key, written out independently of
// eventDiscriminator from what the event's data says.
func expectedKey(t testing.TB, runID string, e execution.EventDraft) string {
	t.Helper()
	node := e.NodeID
	if node == "" {
		node = "-"
	}
	key := fmt.Sprintf("%s/%s/%d/%s", runID, node, e.Attempt, e.Type)
	d := eventData(t, e)
	switch e.Type {
	case execution.EventEdgeTaken, execution.EventEdgeDead:
		key += "/" + d.From + ">" + d.To
	case execution.EventNodeAttemptLeaseLost, execution.EventNodeAttemptInfraRetry:
		key += fmt.Sprintf("/r%d", d.Redispatch)
	case execution.EventNodeApprovalRequested, execution.EventNodeApprovalDecided, execution.EventNodeApprovalTimedOut:
		key += fmt.Sprintf("/q%d", d.Request)
	case execution.EventRunContinued:
		require.True(t, strings.HasPrefix(e.Key, key+"/g"), "run.continued key %s", e.Key)
		return e.Key // its execution's generation is checked by the continue-as-new tests
	}
	return key
}

// wfTest runs the interpreter in the SDK's test environment with fakes.
type wfTest struct {
	t   *testing.T
	env *testsuite.TestWorkflowEnvironment
	f   *fakes
}

func newWF(t *testing.T, desc string, steps map[string][]step) *wfTest {
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestWorkflowEnvironment()
	env.SetTestTimeout(20 * time.Second)
	Register(env)
	f := newFakes(t, parsePlan(t, desc), steps)
	f.register(env)
	return &wfTest{t: t, env: env, f: f}
}

func testParams(mode execution.Mode) execution.RunParams {
	return execution.RunParams{
		TenantID:    "tenant-1",
		TenantName:  "Tenant One",
		RunID:       "run-1",
		WorkflowKey: "wf",
		Revision:    1,
		Checksum:    "sha256-test",
		Mode:        mode,
		Input:       execution.Value{Inline: json.RawMessage(`{"id":"x"}`)},
		Actor:       execution.Actor{Kind: "user", Sub: "u1"},
		Origin:      execution.Origin{Kind: "api"},
		Permissions: []string{"notes.write"},
		EnqueuedAt:  time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

// run executes the workflow and returns its error (nil on success).
func (w *wfTest) run(p execution.RunParams) error {
	w.f.mu.Lock()
	w.f.params = &p
	w.f.mu.Unlock()
	w.env.ExecuteWorkflow(execution.WorkflowName, p)
	require.True(w.t, w.env.IsWorkflowCompleted())
	return w.env.GetWorkflowError()
}

func (w *wfTest) result() execution.Value {
	var v execution.Value
	require.NoError(w.t, w.env.GetWorkflowResult(&v))
	return v
}
