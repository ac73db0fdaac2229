package graph

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// chainDoc is input → n echo actions in a chain (attempts each) → output.
func chainDoc(t *testing.T, n, attempts int) *Document {
	t.Helper()
	var nodes, edges []string
	nodes = append(nodes, `{"id":"in","kind":"input","outputs":{"out":"any"}}`)
	prev := "in"
	for i := range n {
		id := fmt.Sprintf("a%d", i)
		nodes = append(nodes, fmt.Sprintf(`{"id":%q,"kind":"action","inputs":{"in":"any"},"outputs":{"out":"any"},
			"action":{"id":"core.echo","version":1},"retry":{"maxAttempts":%d}}`, id, attempts))
		edges = append(edges, fmt.Sprintf(`{"from":"%s.out","to":"%s.in"}`, prev, id))
		prev = id
	}
	nodes = append(nodes, `{"id":"out","kind":"output","inputs":{"in":"any"}}`)
	edges = append(edges, fmt.Sprintf(`{"from":"%s.out","to":"out.in"}`, prev))
	raw := `{"schemaVersion":1,"nodes":[` + strings.Join(nodes, ",") + `],"edges":[` + strings.Join(edges, ",") + `]}`
	d, err := Decode([]byte(raw))
	require.NoError(t, err)
	return d
}

var echoCatalog = NewStaticCatalog([]ActionContract{{ID: "core.echo", Version: 1, Risk: RiskRead,
	InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{}}}, nil)

func TestEstimateHistory(t *testing.T) {
	small := EstimateHistory(*chainDoc(t, 3, 1), DefaultHistoryBudget)
	// 16 + 3 activities × 7 + 2 inline nodes.
	require.Equal(t, 39, small.TotalEvents, "small: %+v", small)
	require.Equal(t, 39, small.PerExecutionEvents, "small: %+v", small)
	require.False(t, small.ContinueAsNew, "small: %+v", small)
	require.Equal(t, 3, small.MaxPendingActivities, "small: %+v", small)
	require.True(t, small.Fits(), "small: %+v", small)
	// The largest graph the limits allow: 198 actions with 10 attempts.
	big := EstimateHistory(*chainDoc(t, 198, 10), DefaultHistoryBudget)
	require.Equal(t, 16+2+198*(10*7+9*6), big.TotalEvents, "big: %+v", big)
	require.True(t, big.ContinueAsNew, "big: %+v", big)
	want := 6 + 4096 + 198*7 + 5 + 10
	require.Equal(t, want, big.PerExecutionEvents, "big per execution %d, want %d (%+v)", big.PerExecutionEvents, want, big)
	require.True(t, big.Fits(), "big per execution %d, want %d (%+v)", big.PerExecutionEvents, want, big)
	issues := Validate(chainDoc(t, 198, 10), echoCatalog)
	require.Empty(t, issues, "the largest valid graph must fit: %v", issues)
}

func TestHistoryLimitExceededIsAnIssue(t *testing.T) {
	doc := chainDoc(t, 40, 10)
	tight := HistoryBudget{MaxEvents: 300, SuggestContinueAsNewAt: 100, MaxPendingActivities: 30}
	issues := historyIssues(*doc, tight)
	require.Len(t, issues, 2, "issues %v", issues)
	for _, is := range issues {
		require.Equal(t, CodeHistoryLimitExceeded, is.Code, "issue %+v", is)
		require.Equal(t, "/nodes", is.Path, "issue %+v", is)
	}
	require.Contains(t, issues[0].Message, "even with continue-as-new", "messages %v", issues)
	require.Contains(t, issues[1].Message, "pending", "messages %v", issues)
	// Dry-run reports the estimate with the default budget.
	res := DryRun(doc, echoCatalog)
	require.True(t, res.Valid, "dry-run %+v", res)
	require.Equal(t, res.History.TotalEvents, res.EstimatedHistoryEvents, "dry-run %+v", res)
	require.NotEqual(t, 0, res.History.TotalEvents, "dry-run %+v", res)
	require.True(t, res.History.Budget == DefaultHistoryBudget, "dry-run %+v", res)
	c, is := Compile(doc, echoCatalog)
	require.Empty(t, is, "compile %v %v", c, is)
	require.Equal(t, res.EstimatedHistoryEvents, c.EstimatedHistoryEvents, "compile %v %v", c, is)
}
