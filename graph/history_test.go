package graph

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
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
	if err != nil {
		t.Fatal(err)
	}
	return d
}

var echoCatalog = NewStaticCatalog([]ActionContract{{ID: "core.echo", Version: 1, Risk: RiskRead,
	InputSchema: json.RawMessage(`{}`), OutputSchema: json.RawMessage(`{}`), RequiredPermissions: []string{}}}, nil)

func TestEstimateHistory(t *testing.T) {
	small := EstimateHistory(*chainDoc(t, 3, 1), DefaultHistoryBudget)
	// 16 + 3 activities × 7 + 2 inline nodes.
	if small.TotalEvents != 39 || small.PerExecutionEvents != 39 || small.ContinueAsNew || small.MaxPendingActivities != 3 || !small.Fits() {
		t.Fatalf("small: %+v", small)
	}
	// The largest graph the limits allow: 198 actions with 10 attempts.
	big := EstimateHistory(*chainDoc(t, 198, 10), DefaultHistoryBudget)
	if big.TotalEvents != 16+2+198*(10*7+9*6) || !big.ContinueAsNew {
		t.Fatalf("big: %+v", big)
	}
	if want := 6 + 4096 + 198*7 + 5 + 10; big.PerExecutionEvents != want || !big.Fits() {
		t.Fatalf("big per execution %d, want %d (%+v)", big.PerExecutionEvents, want, big)
	}
	if issues := Validate(chainDoc(t, 198, 10), echoCatalog); len(issues) != 0 {
		t.Fatalf("the largest valid graph must fit: %v", issues)
	}
}

func TestHistoryLimitExceededIsAnIssue(t *testing.T) {
	doc := chainDoc(t, 40, 10)
	tight := HistoryBudget{MaxEvents: 300, SuggestContinueAsNewAt: 100, MaxPendingActivities: 30}
	issues := historyIssues(*doc, tight)
	if len(issues) != 2 {
		t.Fatalf("issues %v", issues)
	}
	for _, is := range issues {
		if is.Code != CodeHistoryLimitExceeded || is.Path != "/nodes" {
			t.Fatalf("issue %+v", is)
		}
	}
	if !strings.Contains(issues[0].Message, "even with continue-as-new") || !strings.Contains(issues[1].Message, "pending") {
		t.Fatalf("messages %v", issues)
	}
	// Dry-run reports the estimate with the default budget.
	res := DryRun(doc, echoCatalog)
	if !res.Valid || res.EstimatedHistoryEvents != res.History.TotalEvents || res.History.TotalEvents == 0 ||
		res.History.Budget != DefaultHistoryBudget {
		t.Fatalf("dry-run %+v", res)
	}
	c, is := Compile(doc, echoCatalog)
	if len(is) != 0 || c.EstimatedHistoryEvents != res.EstimatedHistoryEvents {
		t.Fatalf("compile %v %v", c, is)
	}
}
