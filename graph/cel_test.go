package graph

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestGateEval(t *testing.T) {
	cases := []struct {
		expr  string
		input string
		want  bool
	}{
		{"input.id != ''", `{"id":"a"}`, true},
		{"input.id != ''", `{"id":""}`, false},
		{"input.n > 3", `{"n":4}`, true},
		{"input.n == 4", `{"n":4}`, true},
		{"input.items.exists(i, i.ok)", `{"items":[{"ok":false},{"ok":true}]}`, true},
		{"has(input.missing)", `{}`, false},
		{"size(input) == 2", `[1,2]`, true},
		{"input", `true`, true},
	}
	for _, tc := range cases {
		t.Run(tc.expr, func(t *testing.T) {
			g, err := CompileGate(tc.expr)
			require.NoError(t, err)
			got, err := g.EvalJSON(context.Background(), []byte(tc.input))
			require.NoError(t, err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestGateEvalErrors(t *testing.T) {
	g, err := CompileGate("input.id == 'a'")
	require.NoError(t, err)
	_, err = g.Eval(context.Background(), map[string]any{})
	require.Error(t, err, "missing field is an evaluation error, never false")

	_, err = EvalGate(context.Background(), "input", "text")
	require.ErrorContains(t, err, "not bool")

	// A comprehension over a large list exceeds the cost limit, promptly.
	big := make([]any, 100_000)
	for i := range big {
		big[i] = float64(i)
	}
	start := time.Now()
	_, err = EvalGate(context.Background(), "input.all(x, x >= 0)", big)
	require.ErrorContains(t, err, "cost limit exceeded")
	require.Less(t, time.Since(start), 2*time.Second)

	// A small one fits.
	ok, err := EvalGate(context.Background(), "input.all(x, x >= 0)", big[:500])
	require.NoError(t, err)
	require.True(t, ok)

	// A cancelled context stops evaluation.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = EvalGate(ctx, "input.all(x, x >= 0)", big[:500])
	require.ErrorContains(t, err, "cancel")
}

func TestCompileGateRejects(t *testing.T) {
	for _, expr := range []string{
		"",
		"input.",
		"1 + 1",
		"other == 1",
		"input.matches('a').lowerAscii()",
		"true" + strings.Repeat(" ", DefaultLimits.MaxExpressionChars),
	} {
		_, err := CompileGate(expr)
		require.Error(t, err, "expression %q", expr)
	}
}
