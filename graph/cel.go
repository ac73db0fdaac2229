package graph

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
	lru "github.com/hashicorp/golang-lru/v2"
)

// This file is the one cel/v1 environment. Validation and the gate activity
// both compile through it, so an expression that validated is evaluated with
// exactly the same declarations, macros and cost limit at run time.

// GateInputVariable is the one variable a cel/v1 expression sees: the gate's
// input port value, dynamically typed (JSON numbers are doubles, as in CEL's
// own JSON mapping).
const GateInputVariable = "input"

// newCELEnv builds the cel/v1 environment: the standard library with its
// standard macros only (no extension libraries), one dyn variable, and
// cross-type numeric comparisons because JSON numbers arrive as doubles and
// authors write `input.n > 3`. Building it is cheap (~40 µs including the
// lazy set-up of its first check); type-checking an expression in it is not
// (~60 µs for a short one), which is what Compiler caches.
func newCELEnv() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(GateInputVariable, cel.DynType),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(DefaultLimits.MaxExpressionChars),
		cel.EagerlyValidateDeclarations(true),
	)
}

// Compiler holds what validation and compilation can reuse between calls:
// the cel/v1 environment, and LRU caches of the outcome of type-checking a
// gate expression and of compiling a JSON Schema, keyed by the sha256 of
// their exact text (so a cache's size is bounded by its entries alone). Both outcomes are pure functions of that text (the environment and
// the schema loader are fixed), so a cached answer is the answer a fresh
// check would give. A process should hold one Compiler and pass it in
// Options.Compiler to every ValidateWith, DryRunWith and CompileWith; the
// package-level functions without one build a fresh, uncached environment
// per call. A Compiler is safe for concurrent use.
type Compiler struct {
	env    *cel.Env
	envErr error
	// gates maps an expression to "" (it type-checks) or the user-facing
	// reason it does not; schemas does the same for a JSON Schema's bytes.
	// Both are nil when caching is off.
	gates   *lru.Cache[[sha256.Size]byte, string]
	schemas *lru.Cache[[sha256.Size]byte, string]
}

// CompilerConfig bounds a Compiler's caches. The zero value is the defaults.
type CompilerConfig struct {
	// CacheEntries bounds the expressions and the schemas remembered (each
	// cache separately; an entry is a hash and a short message). 0 means
	// DefaultCompilerCacheEntries; a negative value disables caching.
	CacheEntries int
}

// DefaultCompilerCacheEntries is enough for the gates and schemas of many
// limit-sized graphs, a few MiB at most.
const DefaultCompilerCacheEntries = 8192

// NewCompiler builds a Compiler. It never fails: if the cel/v1 environment
// could not be built (a programming error), every gate expression is reported
// INVALID_EXPRESSION with the reason, as before.
func NewCompiler(cfg CompilerConfig) *Compiler {
	c := newUncachedCompiler()
	if cfg.CacheEntries >= 0 {
		entries := cfg.CacheEntries
		if entries == 0 {
			entries = DefaultCompilerCacheEntries
		}
		// lru.New fails only for a size below 1.
		c.gates, _ = lru.New[[sha256.Size]byte, string](entries)
		c.schemas, _ = lru.New[[sha256.Size]byte, string](entries)
	}
	return c
}

// newUncachedCompiler is what the package-level functions use per call.
func newUncachedCompiler() *Compiler {
	env, err := newCELEnv()
	return &Compiler{env: env, envErr: err}
}

// Gate is a compiled cel/v1 expression, safe for concurrent use.
type Gate struct {
	program cel.Program
}

// checkGate parses and type-checks a cel/v1 expression in c's environment,
// without the cache. It returns a user-facing message as the error.
func (c *Compiler) checkGate(expression string) (*cel.Ast, error) {
	if expression == "" {
		return nil, fmt.Errorf("expression is empty")
	}
	if n := utf8.RuneCountInString(expression); n > DefaultLimits.MaxExpressionChars {
		return nil, fmt.Errorf("expression has %d characters; the limit is %d", n, DefaultLimits.MaxExpressionChars)
	}
	if c.envErr != nil {
		return nil, fmt.Errorf("cel environment: %w", c.envErr)
	}
	ast, iss := c.env.Compile(expression)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	out := ast.OutputType()
	if !out.IsExactType(types.BoolType) && !out.IsExactType(types.DynType) {
		return nil, fmt.Errorf("expression must evaluate to bool, not %s", out)
	}
	return ast, nil
}

// gateProblem is why expression does not type-check ("" when it does),
// answered from the cache when the expression was checked before.
func (c *Compiler) gateProblem(expression string) string {
	return cached(c.gates, expression, func() error {
		_, err := c.checkGate(expression)
		return err
	})
}

// schemaProblem is why raw does not compile as a JSON Schema ("" when it
// does), answered from the cache when the same bytes were compiled before.
func (c *Compiler) schemaProblem(raw json.RawMessage) string {
	return cached(c.schemas, string(raw), func() error {
		_, err := CompileSchema(raw)
		return err
	})
}

// cached is check's message ("" for no error) for text, from cache when
// text was checked before.
func cached(cache *lru.Cache[[sha256.Size]byte, string], text string, check func() error) string {
	if msg, ok := lookup(cache, text); ok {
		return msg
	}
	msg := ""
	if err := check(); err != nil {
		msg = err.Error()
	}
	if cache != nil {
		cache.Add(sha256.Sum256([]byte(text)), msg)
	}
	return msg
}

// lookup is the cached message for text, if any.
func lookup(cache *lru.Cache[[sha256.Size]byte, string], text string) (string, bool) {
	if cache == nil {
		return "", false
	}
	return cache.Get(sha256.Sum256([]byte(text)))
}

// CompileGate compiles a cel/v1 gate expression with c's environment and the
// cost limit of DefaultLimits. Callers may cache the result per (checksum,
// node id).
func (c *Compiler) CompileGate(expression string) (*Gate, error) {
	ast, err := c.checkGate(expression)
	if err != nil {
		return nil, err
	}
	prg, err := c.env.Program(ast,
		cel.CostLimit(DefaultLimits.ExpressionCostLimit),
		// Check the context every 100 comprehension steps, so a cancelled
		// or timed-out activity stops evaluating promptly.
		cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	return &Gate{program: prg}, nil
}

// CompileGate compiles a cel/v1 gate expression with a fresh environment and
// the cost limit of DefaultLimits. A process compiling many gates should hold
// a Compiler and use its CompileGate instead.
func CompileGate(expression string) (*Gate, error) {
	return newUncachedCompiler().CompileGate(expression)
}

// Eval evaluates the gate against a JSON-decoded input (maps, slices,
// strings, float64, bool, nil, as encoding/json decodes into any). It
// fails when the expression errs (for example a missing field), exceeds the
// cost limit, yields a non-bool, or ctx ends first.
func (g *Gate) Eval(ctx context.Context, input any) (bool, error) {
	out, _, err := g.program.ContextEval(ctx, map[string]any{GateInputVariable: input})
	if err != nil {
		return false, err
	}
	b, ok := out.Value().(bool)
	if !ok || out.Type() != types.BoolType {
		return false, fmt.Errorf("expression yielded %s, not bool", out.Type().TypeName())
	}
	return b, nil
}

// EvalJSON decodes a JSON value and evaluates the gate against it.
func (g *Gate) EvalJSON(ctx context.Context, raw json.RawMessage) (bool, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return false, fmt.Errorf("gate input: %w", err)
	}
	return g.Eval(ctx, v)
}

// EvalGate compiles and evaluates in one call, for callers that do not cache.
func EvalGate(ctx context.Context, expression string, input any) (bool, error) {
	g, err := CompileGate(expression)
	if err != nil {
		return false, err
	}
	return g.Eval(ctx, input)
}
