package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"time"
	"unicode/utf8"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/graph"
)

// eventLog buffers the events recorded since the log was last known to
// hold them all.
//
// Before interpreter version 2 every loop iteration flushed the buffer in
// a local activity before scheduling what it decided. From version 2 the
// buffer rides along (rideAlong): the activities an iteration schedules
// carry it (execution.EventBatch) and append it before they run the node,
// and report how far they appended (confirm). The local-activity flush is
// left for where nothing would carry the events soon — the iteration arms
// a timer (node.retry.scheduled is durable before its timer starts) or
// starts no activity and waits on work in flight — and for the run's end
// and continue-as-new. Events stay in the buffer until confirmed, so every
// append carries the whole unconfirmed prefix: the log stays in order
// whoever appends first, and keys make the repeats harmless. From version
// 7 an attempt carries only the events no earlier carrier was given (a
// suffix, carryIn), which the store appends only once every event before
// it is in the log; see carryIn for when the whole prefix still goes.
type eventLog struct {
	runID string
	// ordinal is the last ordinal used; it continues across continue-as-new
	// (Carry.EventOrdinal). Before version 4 it is part of every key; from
	// version 4 it only orders the buffer (confirm, durable).
	ordinal int
	// generation counts the executions of the run before this one
	// (Carry.Generation, version 4): run.continued's discriminator.
	generation int
	// recorded counts events recorded by this execution (continue-as-new knob).
	recorded int
	// pending are the events not known to be in the log, ordinals
	// ordinal-len(pending)+1 .. ordinal.
	pending []execution.EventDraft
	// update is applied to the run row in the same transaction as the
	// events recorded after it was set (updateAfter is the ordinal then).
	update      *execution.RunUpdate
	updateAfter int
	// rideAlong: interpreter version 2's buffering (see above); carry: this
	// iteration's activities carry the buffer.
	rideAlong, carry bool
	// durable is the ordinal through which events are known to be in the
	// log (flushed, or confirmed by a carrier); flushNow makes the next
	// iteration flush rather than carry (a recorded approval decision,
	// whose update returns once it is durable).
	durable  int
	flushNow bool
	// carriers (version 7) are the last ordinals of the batches handed to
	// carriers and not known confirmed, oldest first: a prefix starts
	// them, each suffix adds one (carryIn). Not carried across
	// continue-as-new, which flushes.
	carriers []int
	// carryLazy (version 9): this iteration's one attempt, a read-only
	// action's, carries the events lazily (NodeInput.CarryLazyUntil)
	// instead of deferring them under a timer (mayDeferRead). lazy is the
	// last ordinal of the batch the latest lazy carrier still running was
	// given (0 when none): those events are left out of what a deferral's
	// timer waits for (oldestDeferred), since that attempt appends them
	// once they are deferMaxAge old, but not out of carriers, so a later
	// carrier never carries a suffix after them and carries them again
	// (keys make that harmless).
	carryLazy bool
	lazy      int
	// carrier (version 10) is the one attempt of this iteration's fan-out
	// that carries the buffer (fanOutCarrier); nil when every regular
	// attempt the iteration starts carries it (there is at most one).
	carrier *node
}

// maxSuffixChain bounds the carriers in a row whose batches are not known
// confirmed (version 7): the next one carries the whole unconfirmed prefix
// again. Under load a read action's attempt answers two or three carriers
// before its append is reported committed, so a shorter chain would
// re-send most events; a longer one leaves the log further behind when an
// append is lost after its attempt answered (each later suffix is refused
// until a prefix or a flush comes).
const maxSuffixChain = 8

// carryBudget bounds the buffered bytes an attempt carries; above it the
// iteration flushes instead, so no attempt's input grows large.
const carryBudget = 32 << 10

// maxUnsentEvents bounds the unsent events (given to no carrier) an
// iteration that starts one read-only attempt leaves buffered (version 8,
// mayDeferRead): with that many the attempt carries them, so a chain of
// read actions appends about once per four nodes and no carrier's input
// grows long.
const maxUnsentEvents = 12

// setUpdate sets the run update that goes with the next append.
func (l *eventLog) setUpdate(u *execution.RunUpdate) {
	l.update, l.updateAfter = u, l.ordinal
}

// batch is the buffer as an activity carries it.
func (l *eventLog) batch() *execution.EventBatch {
	return &execution.EventBatch{Events: slices.Clone(l.pending), Run: l.update, Through: l.ordinal}
}

// carryIn puts the buffer in the input of the attempt that carries it:
// from version 6 in the compact form (NodeInput.Carried: keys relative to
// the run, no field the key names, times as offsets), which the activities
// expand to exactly the events the plain form holds as the store keeps
// them; the plain form (NodeInput.Events) before, or for a batch the
// compact form cannot hold exactly. A worker of the release before version
// 6 ignores the compact member: it appends nothing and confirms nothing,
// so the events stay buffered until a carrier of this release or a flush
// appends them.
//
// From version 7 an attempt carries a suffix instead (NodeInput.Suffix:
// the compact form with After, the ordinal its events follow) when the
// last carrier was given events not yet confirmed, and new events were
// recorded since: only those new events. The store appends a suffix only
// once appends that vouched for the whole prefix logged every event
// through After (migration 00026), so the log keeps the interpreter's
// order and a confirmation (NodeResult.EventsThrough) still means every
// event through it is in the log. At most maxSuffixChain carriers in a
// row go unconfirmed: the next carries the whole unconfirmed prefix again,
// as does the next carrier after an attempt that failed or reported its
// suffix refused (unsent), so a lost append holds the log back by a few
// carriers at most. A worker of the release before version 7
// ignores the Suffix member, appends nothing and confirms nothing: the
// same as a lost append.
//
// From version 9 a lazy carrier (carryLazy) is given the same batch, with
// the time from which its activity appends it (NodeInput.CarryLazyUntil:
// the oldest event given to no carrier, plus deferMaxAge), but it joins
// no carrier chain: whether its append happens is known only once its
// attempt ends (collect, lazyEnded), so the next carrier carries its
// events again rather than a suffix that could follow an append that
// never comes.
func (i *interpreter) carryIn(in *execution.NodeInput) {
	l := &i.events
	if i.version >= 9 && l.carryLazy {
		i.carryLazily(in)
		return
	}
	if i.version >= 7 {
		first := l.dropConfirmedCarriers()
		if n := len(l.carriers); n > 0 && n < maxSuffixChain && l.carriers[n-1] < l.ordinal {
			sent := l.carriers[n-1]
			if c, ok := execution.CompactBatchOf(l.runID, l.pending[sent-first+1:], l.update, l.ordinal); ok {
				c.After = sent
				in.Suffix = c
				l.carriers = append(l.carriers, l.ordinal)
				return
			}
		}
		// The whole unconfirmed prefix: it follows no carrier's events.
		l.carriers = append(l.carriers[:0], l.ordinal)
	}
	if i.version >= 6 {
		if c, ok := execution.CompactBatchOf(l.runID, l.pending, l.update, l.ordinal); ok {
			in.Carried = c
			return
		}
	}
	in.Events = l.batch()
}

// carryLazily (version 9) puts the events a lazy carrier takes in its
// input: what carryIn would give a carrier — a suffix after the last
// carrier not known confirmed, or the whole unconfirmed prefix — leaving
// the carriers as they are, and the time its activity appends them from.
func (i *interpreter) carryLazily(in *execution.NodeInput) {
	l := &i.events
	l.dropConfirmedCarriers()
	from := l.firstUnsent()
	in.CarryLazyUntil = l.pending[from].At.Add(i.deferMaxAge())
	if n := len(l.carriers); n > 0 && n < maxSuffixChain && l.carriers[n-1] < l.ordinal {
		if c, ok := execution.CompactBatchOf(l.runID, l.pending[from:], l.update, l.ordinal); ok {
			c.After = l.carriers[n-1]
			in.Suffix = c
			l.lazy = l.ordinal
			return
		}
	}
	if c, ok := execution.CompactBatchOf(l.runID, l.pending, l.update, l.ordinal); ok {
		in.Carried = c
		l.lazy = l.ordinal
		return
	}
	// The plain form is never lazy: it goes as any carrier's.
	in.CarryLazyUntil = time.Time{}
	l.carriers = append(l.carriers[:0], l.ordinal)
	in.Events = l.batch()
}

// dropConfirmedCarriers forgets the carriers whose batches are confirmed
// (their last ordinal is before the first buffered event) and returns the
// first buffered event's ordinal.
func (l *eventLog) dropConfirmedCarriers() (first int) {
	first = l.ordinal - len(l.pending) + 1
	k := 0
	for k < len(l.carriers) && l.carriers[k] < first {
		k++
	}
	l.carriers = l.carriers[k:]
	return first
}

// lazyEnded (version 9): the lazy carrier given events through ordinal
// through ended. If it was the latest, no attempt in flight holds events
// lazily any more: what it did not append (its result confirms what it
// did) is unsent again, for the next carrier or flush.
func (l *eventLog) lazyEnded(through int) {
	if l.lazy == through {
		l.lazy = 0
	}
}

// size approximates the buffer's encoded bytes.
func (l *eventLog) size() int {
	n := 0
	for _, e := range l.pending {
		n += len(e.Key) + len(e.Type) + len(e.NodeID) + len(e.Data) + 64
	}
	return n
}

// firstUnsent is the index in pending of the first event no carrier was
// given (version 7's carriers): 0 when none was, len(pending) when every
// event was. An event handed to a carrier whose attempt then failed or
// reported its suffix refused is unsent again (unsent).
func (l *eventLog) firstUnsent() int {
	n := len(l.carriers)
	if n == 0 {
		return 0
	}
	first := l.ordinal - len(l.pending) + 1
	return min(max(l.carriers[n-1]-first+1, 0), len(l.pending))
}

// oldestDeferred is the time of the oldest event whose age bounds a
// deferral (mayDefer, mayDeferRead, armDeferTimer): the oldest buffered
// event before version 8; from version 8 the oldest unsent one, since an
// event given to a carrier still in flight reaches the log with that
// carrier's append, not a flush. ok is false when there is none.
//
// From version 9 it also skips the events a lazy carrier still running
// holds (eventLog.lazy): that attempt appends them once they are
// deferMaxAge old.
func (i *interpreter) oldestDeferred() (at time.Time, ok bool) {
	l := &i.events
	k := 0
	if i.version >= 8 {
		k = l.firstUnsent()
	}
	if i.version >= 9 && l.lazy > 0 {
		first := l.ordinal - len(l.pending) + 1
		k = max(k, min(l.lazy-first+1, len(l.pending)))
	}
	if k >= len(l.pending) {
		return time.Time{}, false
	}
	return l.pending[k].At, true
}

// unsent (version 7) forgets what was handed to carriers: an attempt
// failed, or reported its suffix refused, so the next carrier carries the
// whole unconfirmed prefix.
func (l *eventLog) unsent() {
	l.carriers = l.carriers[:0]
}

// confirm drops the events an activity reported appended, through ordinal.
func (l *eventLog) confirm(through int) {
	if through <= 0 {
		return
	}
	first := l.ordinal - len(l.pending) + 1
	if drop := through - first + 1; drop > 0 {
		l.pending = l.pending[min(drop, len(l.pending)):]
	}
	if l.update != nil && through > l.updateAfter {
		l.update = nil
	}
	l.durable = max(l.durable, through)
}

// ordinalKey is the key of versions 1-3: deterministic on replay, but
// the ordinal depends on the order a workflow task records events, so a
// task executed again with more history (its first execution's flush
// committed, then the worker died) can record an event at another ordinal.
func (l *eventLog) ordinalKey(nodeID string, attempt int, typ string) string {
	if nodeID == "" {
		nodeID = "-"
	}
	return fmt.Sprintf("%s/%s/%d/%s/%d", l.runID, nodeID, attempt, typ, l.ordinal)
}

// identityKey is the key from interpreter version 4: it names the event
// itself, run/node/attempt/type, with a discriminator (eventDiscriminator)
// where one node attempt legitimately records a type more than once. A
// task executed again records the same event under the same key however
// much more history it sees, so the store's idempotency by key holds the
// event once. It never equals an ordinalKey: those end in digits, these
// in a type or a discriminator, which start with a letter or hold a '>'.
func (l *eventLog) identityKey(nodeID string, attempt int, typ, disc string) string {
	if nodeID == "" {
		nodeID = "-"
	}
	key := fmt.Sprintf("%s/%s/%d/%s", l.runID, nodeID, attempt, typ)
	if disc != "" {
		key += "/" + disc
	}
	return key
}

// eventDiscriminator tells apart the events of one type that one node
// attempt (or the run) records more than once; "" for the types recorded
// at most once per node attempt (node.started, node.completed,
// node.attempt.failed, node.retry.scheduled, node.failed, node.skipped,
// the cancellation outcomes) or per run (run.started, run.cancel.requested
// and the terminal events). A legitimately distinct event that shared a
// key with another would be dropped by the store, so every type recorded
// repeatedly must be listed here (TestIdentityKeys; the test harness fails
// a run whose key names two events).
func eventDiscriminator(typ string, d *execution.EventData, generation int) string {
	switch typ {
	case execution.EventEdgeTaken, execution.EventEdgeDead:
		// One per edge of the node's outputs.
		return d.From + ">" + d.To
	case execution.EventNodeAttemptLeaseLost, execution.EventNodeAttemptInfraRetry:
		// One per re-dispatch; the count runs over the node's whole life.
		return fmt.Sprintf("r%d", d.Redispatch)
	case execution.EventNodeApprovalRequested, execution.EventNodeApprovalDecided, execution.EventNodeApprovalTimedOut:
		// An agent attempt can stop before several calls needing approval.
		return fmt.Sprintf("q%d", d.Request)
	case execution.EventRunContinued:
		// One per execution of the run.
		return fmt.Sprintf("g%d", generation)
	}
	return ""
}

// record buffers one event. n is nil for run-level events.
func (i *interpreter) record(typ string, n *node, data execution.EventData) {
	nodeID, attempt := "", 0
	if n != nil {
		nodeID, attempt = n.plan.ID, n.state.Attempt
	}
	i.recordAt(typ, nodeID, attempt, data)
}

func (i *interpreter) recordAt(typ, nodeID string, attempt int, data execution.EventData) {
	if i.simulation {
		v := i.virtualNow()
		data.VirtualAt = &v
	}
	// json.Marshal of a struct is deterministic (fixed field order, sorted
	// map keys); workflowcheck flags it only for its type cache and the GC.
	raw, err := json.Marshal(data) //workflowcheck:ignore
	if err != nil {
		// EventData holds only JSON-safe fields and RawMessage values that
		// came out of a payload decoder; failing here is a programming error.
		panic(fmt.Sprintf("weft interpreter: encode %s event data: %v", typ, err))
	}
	l := &i.events
	l.ordinal++
	l.recorded++
	key := l.ordinalKey(nodeID, attempt, typ)
	if i.version >= 4 {
		key = l.identityKey(nodeID, attempt, typ, eventDiscriminator(typ, &data, l.generation))
	}
	l.pending = append(l.pending, execution.EventDraft{
		Key:     key,
		Type:    typ,
		NodeID:  nodeID,
		Attempt: attempt,
		At:      i.now(),
		Data:    raw,
	})
}

// flush appends the buffered events (and the run update) in one local
// activity. It runs on the disconnected context: a cancellation must not
// lose the events that record it.
func (i *interpreter) flush() error {
	l := &i.events
	if len(l.pending) == 0 && l.update == nil {
		return nil
	}
	in := execution.AppendEventsInput{TenantID: i.p.TenantID, RunID: i.p.RunID, Events: l.pending, Run: l.update}
	if i.version >= 4 {
		in.Through = l.ordinal
	}
	ctx := workflow.WithLocalActivityOptions(i.work, infraActivityOptions(fmt.Sprintf("append %d events", len(l.pending))))
	if err := workflow.ExecuteLocalActivity(ctx, execution.ActivityAppendEvents, in).Get(ctx, nil); err != nil {
		return fmt.Errorf("append events: %w", err)
	}
	l.pending, l.update = nil, nil
	l.durable = l.ordinal
	return nil
}

// flushOrCarry makes the buffer durable before what this iteration
// schedules becomes visible, in the cheapest way that keeps order: before
// version 2 a flush; from version 2 the one regular activity it starts
// carries the buffer (a flush when it starts several, or the buffer is
// large), and an iteration that starts only local activities leaves it for
// the next one (they finish in this workflow task, before anything else
// happens). From version 5 an iteration that starts nothing while regular
// attempts still run may leave it too (mayDefer); from version 8 so may an
// iteration whose one regular attempt is a read-only action's
// (mayDeferRead).
func (i *interpreter) flushOrCarry() error {
	l := &i.events
	l.carry, l.carryLazy, l.carrier = false, false, nil
	if !l.rideAlong {
		return i.flush()
	}
	if len(l.pending) == 0 && l.update == nil {
		return nil
	}
	if l.flushNow {
		l.flushNow = false
		return i.flush()
	}
	regular, local, timers := 0, 0, false
	var starting *node // the regular attempt, when there is one
	for _, n := range i.nodes {
		switch {
		case n.start && isLocal(n.plan.Kind):
			local++
		case n.start:
			regular++
			starting = n
		case n.timer == nil && !n.due &&
			(n.state.Status == execution.NodeWaiting || awaitingRedispatch(n)):
			timers = true
		case n.timer == nil && awaitingApproval(n):
			// A wait for a decision begins: node.approval.requested is in
			// the log before anyone can decide (approvals.go).
			timers = true
		}
	}
	switch {
	case timers:
		return i.flush()
	case regular == 0 && local == 0:
		if i.version >= 5 && i.mayDefer(i.now()) {
			i.armDeferTimer()
			return nil
		}
		return i.flush()
	case regular > 1 && i.version >= 10 && l.size() <= carryBudget:
		if c := i.fanOutCarrier(); c != nil {
			l.carry, l.carrier = true, c
			return nil
		}
		return i.flush()
	case regular > 1, regular == 1 && l.size() > carryBudget:
		// Several carriers would each append the same batch, contending
		// for the run's row lock, and copy it into every attempt's input:
		// one flush is cheaper.
		return i.flush()
	case regular == 1:
		if i.version >= 8 && i.mayDeferRead(starting, i.now()) {
			if i.version >= 9 {
				// The attempt carries them lazily: it appends them itself
				// if it still runs when the oldest is deferMaxAge old, and
				// no timer is armed (carryLazily).
				l.carry, l.carryLazy = l.firstUnsent() < len(l.pending), true
				return nil
			}
			i.armDeferTimer()
			return nil
		}
		l.carry = true
	}
	return nil
}

// readOnlyAction says whether n is an action node whose action only reads
// (graph.PlanNode.ReadOnly: risk read, no side effects).
func (n *node) readOnlyAction() bool {
	return n.plan.Kind == graph.KindAction && n.plan.ReadOnly
}

// timerOrDecisionInPlay says whether n waits on a timer (a retry's backoff,
// a re-dispatch, an approval's timeout) or on a decision: an iteration then
// neither defers the buffer nor lets a fan-out carry it.
func (n *node) timerOrDecisionInPlay() bool {
	return n.timer != nil || n.decided != nil || n.deciding || awaitingApproval(n)
}

// fanOutCarrier (interpreter version 10) is the one attempt of the
// regular attempts this iteration starts that carries the buffer, or nil
// when they need a flush first: several of them are not read-only
// actions' (graph.PlanNode.ReadOnly), or a timer or an approval is in
// play. The carrier is the one that is not read-only, else the first in
// compiled order.
//
// What it trades: every attempt but a read's must find its node.started
// in the log before it acts, which its own carried append gives the
// carrier; a read has no side effects, so its node.started may reach the
// log after it ran (as from version 8), with the carrier's append, in the
// interpreter's order. One append instead of a flush in the workflow
// task that starts the fan-out: nothing on the run's path waits for a
// commit. If the carrier's append is lost or refused, or the carrier
// fails, the events are unsent again (collect) and the next carrier or
// flush appends them, as for any carrier.
func (i *interpreter) fanOutCarrier() *node {
	var first, write *node
	for _, n := range i.nodes {
		if n.timerOrDecisionInPlay() {
			return nil
		}
		if !n.start || isLocal(n.plan.Kind) {
			continue
		}
		if first == nil {
			first = n
		}
		if !n.readOnlyAction() {
			if write != nil {
				return nil
			}
			write = n
		}
	}
	if write != nil {
		return write
	}
	return first
}

// mayDeferRead (interpreter version 8; now is workflow time) says whether
// the one regular attempt an iteration starts may go without the buffered
// events (NodeInput carries none), leaving them to the next carrier or
// flush: n is an action node whose action only reads (graph.PlanNode's
// ReadOnly: risk read), fewer than maxUnsentEvents events are unsent
// (given to no carrier), the buffer stays within carryBudget and holds no
// run update no carrier was given, the oldest unsent event is younger than deferMaxAge, and no
// timer or approval is in play (as for mayDefer). armDeferTimer then
// bounds how long the events wait, as for a collect-only workflow task.
//
// What it trades: a read action has no side effects, so nothing outside
// the workflow depends on its node.started being in the log before it
// runs; the events reach the log with the next carrier (a write action's
// attempt, or a read one's once maxUnsentEvents are unsent), a flush (a
// timer, several attempts, a decision, the defer timer, the run's end,
// continue-as-new, a cancellation), in the interpreter's order, under the
// same keys. A chain of read actions appends about once per four nodes
// instead of once per node, and the event stream shows a read node's
// start up to deferMaxAge (or maxUnsentEvents events) later.
//
// From version 9 no timer is armed: the attempt carries the unsent events
// lazily (carryLazily), and its activity appends them if it still runs
// when the oldest is deferMaxAge old; a quick read appends nothing and
// they are unsent again. Every unsent event counts here, those a lazy
// carrier still running holds too, since this attempt carries them again.
func (i *interpreter) mayDeferRead(n *node, now time.Time) bool {
	if n == nil || !n.readOnlyAction() {
		return false
	}
	l := &i.events
	sent := l.firstUnsent()
	if l.size() > carryBudget || len(l.pending)-sent >= maxUnsentEvents {
		return false
	}
	if l.update != nil && sent == 0 {
		return false // the run's update goes out at once; with a carrier in flight it went with it
	}
	if i.version >= 9 {
		// Every unsent event counts, those a lazy carrier in flight holds
		// too: this attempt carries them again (carryLazily).
		if sent < len(l.pending) && now.Sub(l.pending[sent].At) >= i.deferMaxAge() {
			return false
		}
	} else if at, ok := i.oldestDeferred(); ok && now.Sub(at) >= i.deferMaxAge() {
		return false
	}
	for _, o := range i.nodes {
		if o.timerOrDecisionInPlay() {
			return false
		}
	}
	return true
}

// deferMaxAge bounds how long an iteration that starts nothing leaves
// buffered events to the next carrier or flush (mayDefer; the run's
// Durability.EventDeferMs, 1 s by default): a fan-out's siblings of quick
// nodes end well within it, so their collect-only workflow tasks append
// nothing, while a sibling's completion still reaches the log about this
// long after it, however long the others run (armDeferTimer).
func (i *interpreter) deferMaxAge() time.Duration {
	return time.Duration(i.durability.WithDefaults().EventDeferMs) * time.Millisecond
}

// mayDefer (interpreter version 5; now is workflow time) says whether an iteration that starts
// nothing may leave the buffer as it is instead of flushing it: the
// workflow task only collected completions (a fan-out's siblings ending
// one by one) while other regular attempts of the run are still running,
// and no timer or approval is in play. The next workflow task comes when
// one of those attempts ends, or when armDeferTimer's timer fires
// (deferMaxAge after the oldest buffered event), and then the buffer is
// carried by the one attempt it starts, or flushed (the timer, several
// attempts, a node's timer, a decision, the run's end, continue-as-new, a
// cancellation).
// Nothing waits on these events meanwhile: they are node.completed,
// node.attempt.failed and edge events of attempts that already ended, and
// nothing they lead to has started. The buffer stays bounded by
// carryBudget bytes, so any later carrier can take it, and by deferMaxAge:
// the first iteration that finds its oldest event older than that flushes
// (from version 8 its oldest unsent event: oldestDeferred).
// What it trades: an early sibling's completion reaches the event stream
// up to deferMaxAge later than its own workflow task, for one commit less.
func (i *interpreter) mayDefer(now time.Time) bool {
	l := &i.events
	if l.size() > carryBudget {
		return false
	}
	// The run's update goes out at once; from version 10 a carrier in
	// flight that holds it (a fan-out's, whose reads answered first) is
	// as good.
	if l.update != nil && (i.version < 10 || l.firstUnsent() == 0) {
		return false
	}
	if at, ok := i.oldestDeferred(); ok && now.Sub(at) >= i.deferMaxAge() {
		return false // from version 8 the oldest unsent event's age
	}
	running := false
	for _, n := range i.nodes {
		switch {
		case n.timerOrDecisionInPlay():
			return false
		case n.future != nil && !isLocal(n.plan.Kind):
			running = true
		}
	}
	return running
}

// armDeferTimer makes sure a timer fires by the time the oldest buffered
// event is deferMaxAge old (workflow time), unless one already does. A
// workflow task comes only when something of the run ends, so without it a
// fan-out sibling's completion would wait for the next sibling to end,
// however long that takes. The timer is left alone when something else
// flushes or carries the buffer first: at the run's end it is dropped with
// the execution, and if it fires on an empty buffer its workflow task does
// nothing, which is cheaper than cancelling it in every run.
//
// From version 8 it counts only unsent events (oldestDeferred): those
// given to a carrier in flight reach the log with its append.
func (i *interpreter) armDeferTimer() {
	if i.deferTimer != nil {
		return
	}
	at, ok := i.oldestDeferred()
	if !ok {
		return
	}
	i.deferFor = at
	left := i.deferMaxAge() - i.now().Sub(at)
	i.deferTimer = workflow.NewTimerWithOptions(i.work, max(left, time.Millisecond), workflow.TimerOptions{
		Summary: "events · flush deferred",
	})
}

// collectDeferTimer: once armDeferTimer's timer has fired, the next
// iteration flushes whatever is buffered (nothing, if a carrier or a flush
// took it meanwhile). From version 8 it flushes only if the event the
// timer was armed for, or an older one, is still unsent; otherwise the
// events since are younger, and the iteration defers them again with a
// timer of their own (mayDefer, mayDeferRead) or carries or flushes them.
func (i *interpreter) collectDeferTimer() {
	if i.deferTimer == nil || !i.deferTimer.IsReady() {
		return
	}
	_ = i.deferTimer.Get(i.work, nil) // only a cancellation errs, and nothing cancels it
	i.deferTimer = nil
	if i.version >= 8 {
		if at, ok := i.oldestDeferred(); ok && !at.After(i.deferFor) {
			i.events.flushNow = true
		}
		return
	}
	if len(i.events.pending) > 0 {
		i.events.flushNow = true
	}
}

// infraActivityOptions are for LoadPlan and AppendEvents: unlike node
// attempts they retry until they succeed (a database blip delays the run, it
// does not fail it); a non-retryable error still stops them.
func infraActivityOptions(summary string) workflow.LocalActivityOptions {
	return workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:    time.Second,
			BackoffCoefficient: 2,
			MaximumInterval:    time.Minute,
		},
		Summary: summary,
	}
}

// valueData copies a value into event data, bounded by MaxEventValueBytes.
func valueData(d *execution.EventData, v execution.Value) {
	switch {
	case v.Ref != nil:
		ref := *v.Ref
		d.OutputRef = &ref
	case len(v.Inline) > execution.MaxEventValueBytes:
		d.Truncated = true
		d.OutputSize = len(v.Inline)
	case len(v.Inline) > 0:
		d.Output = v.Inline
	}
}

// errorData turns a classified failure into event data, bounded by MaxEventMessageBytes.
func errorData(d *execution.EventData, f failure) {
	msg := f.message
	if len(msg) > execution.MaxEventMessageBytes {
		cut := execution.MaxEventMessageBytes
		for cut > 0 && !utf8.RuneStart(msg[cut]) {
			cut--
		}
		msg = msg[:cut]
		d.Truncated = true
	}
	d.Error = &execution.EventError{Type: f.typ, Message: msg}
}

// portName is "node.port", the key of ports and the edge notation.
func portName(nodeID, port string) string { return nodeID + "." + port }
