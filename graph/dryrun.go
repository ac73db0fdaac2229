package graph

import "slices"

// DryRunResult is what a dry-run answers (SPEC §4): everything publication
// would decide, without storing or calling anything.
type DryRunResult struct {
	Valid  bool    `json:"valid"`
	Issues []Issue `json:"issues"`
	// Warnings never make a document invalid: a toolset without a summary
	// (MISSING_TOOLSET_SUMMARY, ToolsetWarnings) keeps working, and is
	// asked for.
	Warnings []Issue `json:"warnings"`
	// Order is the compile order; empty when the graph has a cycle.
	Order      []string     `json:"order"`
	References ReferenceSet `json:"references"`
	// Permissions is the sorted union of the permissions of the dependencies
	// that resolved.
	Permissions []string `json:"permissions"`
	// Checksum is the revision checksum publication would store; empty when
	// the document has issues.
	Checksum string `json:"checksum"`
	Limits   Limits `json:"limits"`
	// EstimatedHistoryEvents is the worst-case Temporal history of one run
	// (nodes x attempts; EstimateHistoryEvents), what publication stores.
	EstimatedHistoryEvents int `json:"estimatedHistoryEvents"`
	// History details it against Temporal's budget (EstimateHistory); a
	// revision that cannot fit even with continue-as-new has the issue
	// HISTORY_LIMIT_EXCEEDED.
	History HistoryEstimate `json:"history"`
}

// ReferenceSet is the dependencies a document names (see References).
type ReferenceSet struct {
	Actions []ActionRef `json:"actions"`
	Agents  []AgentRef  `json:"agents"`
}

// DryRun validates doc and reports what publishing it would produce.
func DryRun(doc *Document, cat Catalog) DryRunResult {
	return DryRunWith(doc, cat, Options{})
}

// DryRunWith is DryRun with extension hooks.
func DryRunWith(doc *Document, cat Catalog, opts Options) DryRunResult {
	a := analyze(doc, cat, opts)
	actions, agents := References(doc)
	res := DryRunResult{
		Issues:      a.issues,
		Warnings:    ToolsetWarnings(doc),
		Order:       a.order,
		References:  ReferenceSet{Actions: actions, Agents: agents},
		Permissions: []string{},
		Limits:      DefaultLimits,
	}
	if doc != nil {
		res.History = EstimateHistory(*doc, opts.historyBudget())
		res.EstimatedHistoryEvents = res.History.TotalEvents
	}
	if res.Order == nil {
		res.Order = []string{}
	}
	if len(a.issues) == 0 {
		c, err := a.compile()
		if err != nil {
			res.Issues = []Issue{{Code: CodeInvalidDocument, Message: err.Error()}}
		} else {
			res.Checksum = c.Checksum
			res.Permissions = c.Permissions
		}
	} else {
		for _, p := range a.nodePerms {
			res.Permissions = append(res.Permissions, p...)
		}
		res.Permissions = sortedDistinct(res.Permissions)
	}
	res.Valid = len(res.Issues) == 0
	return res
}

// sortedDistinct sorts s and drops repeats; nil becomes empty so JSON shows [].
func sortedDistinct(s []string) []string {
	if s == nil {
		return []string{}
	}
	slices.Sort(s)
	return slices.Compact(s)
}
