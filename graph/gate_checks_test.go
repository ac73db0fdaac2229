package graph

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The helper goroutine must not change what validation reports, nor its
// order: every gate issue is the one a sequential check gives, in node order,
// whichever side checked the expression and however validations interleave.
func TestGateChecksMatchSequential(t *testing.T) {
	doc := genGraph(40, 0)
	broken := []string{"input.n +", "nope(input)", "input.n + 1", `1 + "a"`}
	for k := 0; k < 40; k++ {
		n := &doc.Nodes[1+3*k]
		switch {
		case k%5 == 0:
			n.Expression = broken[k/5%len(broken)] // repeated: reported per node
		case k%7 == 0:
			n.Expression = "input != null && 7 >= 0" // the same as another gate
		}
	}
	var want []Issue
	for i, n := range doc.Nodes {
		if n.Kind != KindGate {
			continue
		}
		if _, err := newUncachedCompiler().checkGate(n.Expression); err != nil {
			want = append(want, Issue{Code: CodeInvalidExpression, Path: nodePath(i, "expression"), Message: err.Error()})
		}
	}
	require.Len(t, want, 8)

	gateIssues := func(issues []Issue) []Issue {
		var out []Issue
		for _, is := range issues {
			if is.Code == CodeInvalidExpression {
				out = append(out, is)
			}
		}
		return out
	}
	shared := NewCompiler(CompilerConfig{})
	var wg sync.WaitGroup
	for r := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			opts := Options{Compiler: NewCompiler(CompilerConfig{})}
			if r%2 == 0 {
				opts.Compiler = shared // some answers cached, some racing
			}
			for range 3 {
				require.Equal(t, want, gateIssues(ValidateWith(doc, testCatalog(), opts)), fmt.Sprintf("validation %d", r))
			}
		}()
	}
	wg.Wait()
	// Without a Compiler the answer is the same.
	require.Equal(t, want, gateIssues(Validate(doc, testCatalog())))
}
