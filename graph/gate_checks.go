package graph

import (
	"runtime"
	"sync/atomic"
	"unicode/utf8"
)

// Type-checking cel/v1 expressions is most of a cold validation (the ANTLR
// parser and the overload resolution of cel-go, ~50 µs per expression). A
// graph's distinct gate expressions are independent of each other and of the
// rest of the analysis, so when there are several and a second CPU, a helper
// goroutine checks them from the last one backwards while the analysis works
// forwards and checks them itself as it reaches them. Either side claims an
// expression before checking it, so each is checked once, and the analysis
// reads every outcome in node order: the issues and their order are exactly
// those of a sequential check.

// gateChecks holds the outcome of checking each distinct gate expression of
// one analysis.
type gateChecks struct {
	compiler *Compiler
	index    map[string]int
	slots    []gateSlot
	// stop tells the helper to claim nothing more (the analysis is over).
	stop atomic.Bool
}

// gateSlot is one distinct expression's check.
type gateSlot struct {
	expression string
	// state is slotPending, slotClaimed or slotDone.
	state atomic.Int32
	// done is closed when msg is set, for a reader that found it claimed.
	done chan struct{}
	msg  string
}

const (
	slotPending int32 = iota
	slotClaimed
	slotDone
)

// minParallelGates is the fewest unchecked expressions worth a helper
// goroutine: below it the hand-off costs more than it saves.
const minParallelGates = 4

// newGateChecks collects doc's distinct cel/v1 expressions that the
// Compiler has not already answered and, when there are enough of them,
// starts the helper. Expressions the analysis reports for other reasons
// (another language, too long) are left out: they are never type-checked.
// The Compiler is asked for only when there is an expression to check.
func newGateChecks(doc *Document, compiler func() *Compiler) *gateChecks {
	g := &gateChecks{index: map[string]int{}}
	for _, n := range doc.Nodes {
		if n.Kind != KindGate || n.Language != LanguageCELv1 {
			continue
		}
		if _, seen := g.index[n.Expression]; seen {
			continue
		}
		if utf8.RuneCountInString(n.Expression) > DefaultLimits.MaxExpressionChars {
			continue
		}
		g.index[n.Expression] = len(g.slots)
		g.slots = append(g.slots, gateSlot{expression: n.Expression})
	}
	if len(g.slots) == 0 {
		return g
	}
	c := compiler()
	g.compiler = c
	unchecked := 0
	for i := range g.slots {
		s := &g.slots[i]
		if msg, ok := lookup(c.gates, s.expression); ok {
			s.msg = msg
			s.state.Store(slotDone)
			continue
		}
		s.done = make(chan struct{})
		unchecked++
	}
	if unchecked >= minParallelGates && runtime.GOMAXPROCS(0) > 1 {
		go g.help()
	}
	return g
}

// help checks expressions from the last one backwards until it meets the
// analysis or is told to stop.
func (g *gateChecks) help() {
	for i := len(g.slots) - 1; i >= 0 && !g.stop.Load(); i-- {
		g.check(&g.slots[i])
	}
}

// check claims s and checks it; it does nothing when s was claimed already.
func (g *gateChecks) check(s *gateSlot) bool {
	if !s.state.CompareAndSwap(slotPending, slotClaimed) {
		return false
	}
	s.msg = g.compiler.gateProblem(s.expression)
	s.state.Store(slotDone)
	close(s.done)
	return true
}

// problem is why expression does not type-check ("" when it does), checking
// it now unless the helper has (or is doing so, then waiting for it). The
// expression must be one newGateChecks collected: asking for another is a
// programming error (the two would disagree on which gates are checked).
func (g *gateChecks) problem(expression string) string {
	i, ok := g.index[expression]
	if !ok {
		panic("graph: gate expression was not collected by newGateChecks")
	}
	s := &g.slots[i]
	if s.state.Load() != slotDone && !g.check(s) {
		<-s.done
	}
	return s.msg
}

// close stops the helper from starting another check.
func (g *gateChecks) close() {
	if g != nil {
		g.stop.Store(true)
	}
}
