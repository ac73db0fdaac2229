package graph

import "fmt"

// CodeHistoryLimitExceeded refuses a revision whose run could not stay
// within Temporal's per-execution limits even with continue-as-new.
const CodeHistoryLimitExceeded = "HISTORY_LIMIT_EXCEEDED"

// HistoryBudget is what one Temporal workflow execution can hold: the
// server's limits (dynamic config defaults of Temporal Server 1.29) and the
// point at which it suggests continue-as-new.
type HistoryBudget struct {
	// MaxEvents is limit.historyCount.error: an execution with more
	// events is terminated by the server.
	MaxEvents int `json:"maxEvents"`
	// SuggestContinueAsNewAt is limit.historyCount.suggestContinueAsNew:
	// from this length on, every workflow task says continue-as-new is due.
	SuggestContinueAsNewAt int `json:"suggestContinueAsNewAt"`
	// MaxPendingActivities is limit.numPendingActivities.error.
	MaxPendingActivities int `json:"maxPendingActivities"`
}

// DefaultHistoryBudget is Temporal's default budget.
var DefaultHistoryBudget = HistoryBudget{
	MaxEvents:              50 * 1024,
	SuggestContinueAsNewAt: 4 * 1024,
	MaxPendingActivities:   2000,
}

// History events of the continue-as-new handoff: the run.continued flush
// marker, the workflow task that decides it, and the
// WorkflowExecutionContinuedAsNew event.
const historyContinueAsNew = 1 + 3 + 1

// HistoryEstimate is what publication (and dry-run) reports about a
// revision's Temporal history.
type HistoryEstimate struct {
	// TotalEvents is the worst-case history of a whole run as if it were
	// one execution (EstimateHistoryEvents). Continue-as-new splits a run
	// whose total exceeds the budget, so this may exceed MaxEvents.
	TotalEvents int `json:"totalEvents"`
	// PerExecutionEvents is the worst case one execution must hold even
	// with continue-as-new (see EstimateHistory).
	PerExecutionEvents int `json:"perExecutionEvents"`
	// MaxPendingActivities is the most activities one workflow task may
	// have scheduled at once.
	MaxPendingActivities int `json:"maxPendingActivities"`
	// ContinueAsNew says a worst-case run continues as new at least once.
	ContinueAsNew bool          `json:"continueAsNew"`
	Budget        HistoryBudget `json:"budget"`
}

// EstimateHistory bounds the history of doc's runs against budget.
//
// The interpreter continues as new when Temporal suggests it (history at
// SuggestContinueAsNewAt events), but only after draining: it starts no new
// attempt and waits for the attempts in flight. So one execution must hold
//
//	PerExecutionEvents = 6 + SuggestContinueAsNewAt + Σ_nodes drain(node) + 5 + 10
//
// where 6 is the execution's start, first workflow task and LoadPlan
// marker, drain(node) is what a node can add after the suggestion (one
// attempt completing: 7 events for agent, agent-decision and action nodes,
// 5 for gates, validators and merges, or 6 for a retry timer firing,
// whichever is more; 21 for an approval node, or an agent node whose
// toolset requires approvals, whose decision may be in flight; 0 for
// input and output nodes), 5 is the handoff
// (run.continued flush, its workflow task, the continued-as-new event) and
// 10 covers a cancellation. Every node that runs an activity is counted
// as possibly in flight at once (a safe upper bound on the graph's width),
// which also bounds MaxPendingActivities. A run whose TotalEvents stays
// below the suggestion point never continues as new; either way
// PerExecutionEvents is at most TotalEvents.
//
// A revision fits when PerExecutionEvents <= MaxEvents and
// MaxPendingActivities <= budget.MaxPendingActivities. With DefaultLimits
// (200 nodes, 10 attempts) every valid revision fits Temporal's default
// budget: at most 6 + 4096 + 200×7 + 5 + 10 = 5,517 events and 200 pending
// activities, and TotalEvents at most 16 + 200×(10×7 + 9×6) = 24,816. A
// cluster configured with lower limits (Options.HistoryBudget, from the
// WEFT_HISTORY_* settings) is what makes HISTORY_LIMIT_EXCEEDED reachable.
func EstimateHistory(doc Document, budget HistoryBudget) HistoryEstimate {
	est := HistoryEstimate{TotalEvents: EstimateHistoryEvents(doc), Budget: budget}
	drain := 0
	for _, n := range doc.Nodes {
		switch {
		case n.Kind == KindApproval:
			// A wait is carried across continue-as-new; only a decision
			// in flight (its operator identity lookup is an activity)
			// holds the handoff.
			drain += historyApprovalWait
			est.MaxPendingActivities++
		case isLocal(n.Kind):
			drain += max(historyLocalAttempt, historyRetryDelay)
			est.MaxPendingActivities++ // a local attempt also blocks the handoff
		case runsActivity(n.Kind):
			step := max(historyActivityAttempt, historyRetryDelay)
			if asksApprovals(&doc, n) {
				step = max(step, historyApprovalWait)
			}
			drain += step
			est.MaxPendingActivities++
		}
	}
	est.PerExecutionEvents = est.TotalEvents
	if est.TotalEvents >= budget.SuggestContinueAsNewAt {
		est.ContinueAsNew = true
		est.PerExecutionEvents = min(est.TotalEvents, historyWorkflowOverhead+budget.SuggestContinueAsNewAt+drain+
			historyContinueAsNew+historyCancellationBuffer)
	}
	return est
}

// Fits reports whether the estimate stays within its budget.
func (e HistoryEstimate) Fits() bool {
	return e.PerExecutionEvents <= e.Budget.MaxEvents && e.MaxPendingActivities <= e.Budget.MaxPendingActivities
}

// historyIssues returns HISTORY_LIMIT_EXCEEDED when doc's runs could not
// fit budget even with continue-as-new.
func historyIssues(doc Document, budget HistoryBudget) []Issue {
	e := EstimateHistory(doc, budget)
	var out []Issue
	if e.PerExecutionEvents > budget.MaxEvents {
		out = append(out, Issue{Code: CodeHistoryLimitExceeded, Path: "/nodes", Message: fmt.Sprintf(
			"one workflow execution of this revision could need %d history events even with continue-as-new; Temporal allows %d",
			e.PerExecutionEvents, budget.MaxEvents)})
	}
	if e.MaxPendingActivities > budget.MaxPendingActivities {
		out = append(out, Issue{Code: CodeHistoryLimitExceeded, Path: "/nodes", Message: fmt.Sprintf(
			"up to %d activities could be pending at once; Temporal allows %d",
			e.MaxPendingActivities, budget.MaxPendingActivities)})
	}
	return out
}

// checkHistory adds HISTORY_LIMIT_EXCEEDED against the options' budget.
func (a *analysis) checkHistory() {
	if a.doc == nil {
		return
	}
	a.issues = append(a.issues, historyIssues(*a.doc, a.opts.historyBudget())...)
}
