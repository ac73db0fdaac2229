package graph

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"reflect"
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

func TestCompilerCachesOutcomes(t *testing.T) {
	c := NewCompiler(CompilerConfig{})
	cat := testCatalog()
	doc := genGraph(5, 1)
	doc.Nodes[1].Expression = "input.nope("            // does not parse
	doc.Nodes[4].Expression = "'s'"                    // not bool
	doc.Schemas["Bad"] = json.RawMessage(`{"type":1}`) // does not compile
	want := Validate(doc, cat)
	require.NotEmpty(t, want)
	for range 3 { // the first call fills the caches, the others read them
		require.Equal(t, want, ValidateWith(doc, cat, Options{Compiler: c}))
	}
	require.Equal(t, 5, c.gates.Len(), "one entry per distinct expression")
	require.Equal(t, 3, c.schemas.Len(), "one entry per distinct schema")

	// A cached answer is the fresh answer, message included.
	for _, n := range doc.Nodes {
		if n.Kind != KindGate {
			continue
		}
		msg, ok := lookup(c.gates, n.Expression)
		require.True(t, ok, n.Expression)
		fresh := ""
		if _, err := c.checkGate(n.Expression); err != nil {
			fresh = err.Error()
		}
		require.Equal(t, fresh, msg, n.Expression)
	}

	g, err := c.CompileGate("input.n > 3")
	require.NoError(t, err)
	ok, err := g.EvalJSON(context.Background(), []byte(`{"n":4}`))
	require.NoError(t, err)
	require.True(t, ok)
}

func TestCompilerCacheBounds(t *testing.T) {
	c := NewCompiler(CompilerConfig{CacheEntries: 10})
	for i := range 100 {
		c.gateProblem(fmt.Sprintf("input.n > %d", i))
		require.LessOrEqual(t, c.gates.Len(), 10)
	}
	// Recently used entries survive: the last one is still there.
	require.True(t, c.gates.Contains(sha256.Sum256([]byte("input.n > 99"))))
	require.False(t, c.gates.Contains(sha256.Sum256([]byte("input.n > 0"))))
	// A cached answer is the answer.
	require.Equal(t, "", c.gateProblem("input.n > 99"))
	require.NotEqual(t, "", c.gateProblem("input."))
	require.Equal(t, c.gateProblem("input."), c.gateProblem("input."))

	c = NewCompiler(CompilerConfig{CacheEntries: -1})
	require.Equal(t, "", c.gateProblem("true"))
	require.Nil(t, c.gates)
}

// TestCompilerConcurrent shares one Compiler between goroutines (run with
// -race): every validation sees the same issues as an uncached one.
func TestCompilerConcurrent(t *testing.T) {
	c := NewCompiler(CompilerConfig{CacheEntries: 16})
	cat := testCatalog()
	docs := []*Document{genGraph(8, 2), genGraph(3, 0), docFromBytes([]byte("gates and more gates 0123456789"))}
	want := make([][]Issue, len(docs))
	for i, d := range docs {
		want[i] = Validate(d, cat)
	}
	done := make(chan struct{})
	for w := range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for k := range 20 {
				i := (w + k) % len(docs)
				if got := ValidateWith(docs[i], cat, Options{Compiler: c}); !reflect.DeepEqual(want[i], got) {
					t.Errorf("doc %d: %v, want %v", i, got, want[i])
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}
