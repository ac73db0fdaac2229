package graph

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"unicode/utf8"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/common/types"
)

// This file is the one cel/v1 environment. Validation and the gate activity
// both compile through it, so an expression that validated is evaluated with
// exactly the same declarations, macros and cost limit at run time.

// GateInputVariable is the one variable a cel/v1 expression sees: the gate's
// input port value, dynamically typed (JSON numbers are doubles, as in CEL's
// own JSON mapping).
const GateInputVariable = "input"

// celEnv builds the environment once: the standard library with its standard
// macros only (no extension libraries), one dyn variable, and cross-type
// numeric comparisons because JSON numbers arrive as doubles and authors
// write `input.n > 3`.
var celEnv = sync.OnceValues(func() (*cel.Env, error) {
	return cel.NewEnv(
		cel.Variable(GateInputVariable, cel.DynType),
		cel.CrossTypeNumericComparisons(true),
		cel.ParserExpressionSizeLimit(DefaultLimits.MaxExpressionChars),
		cel.EagerlyValidateDeclarations(true),
	)
})

// Gate is a compiled cel/v1 expression, safe for concurrent use.
type Gate struct {
	program cel.Program
}

// checkGate parses and type-checks a cel/v1 expression. It is the part of
// CompileGate that validation needs; it returns a user-facing message.
func checkGate(expression string) (*cel.Ast, error) {
	if expression == "" {
		return nil, fmt.Errorf("expression is empty")
	}
	if n := utf8.RuneCountInString(expression); n > DefaultLimits.MaxExpressionChars {
		return nil, fmt.Errorf("expression has %d characters; the limit is %d", n, DefaultLimits.MaxExpressionChars)
	}
	env, err := celEnv()
	if err != nil {
		return nil, fmt.Errorf("cel environment: %w", err)
	}
	ast, iss := env.Compile(expression)
	if iss != nil && iss.Err() != nil {
		return nil, iss.Err()
	}
	out := ast.OutputType()
	if !out.IsExactType(types.BoolType) && !out.IsExactType(types.DynType) {
		return nil, fmt.Errorf("expression must evaluate to bool, not %s", out)
	}
	return ast, nil
}

// CompileGate compiles a cel/v1 gate expression with the shared environment
// and the cost limit of DefaultLimits. Callers may cache the result per
// (checksum, node id).
func CompileGate(expression string) (*Gate, error) {
	ast, err := checkGate(expression)
	if err != nil {
		return nil, err
	}
	env, _ := celEnv() // checkGate returned its error
	prg, err := env.Program(ast,
		cel.CostLimit(DefaultLimits.ExpressionCostLimit),
		// Check the context every 100 comprehension steps, so a cancelled
		// or timed-out activity stops evaluating promptly.
		cel.InterruptCheckFrequency(100))
	if err != nil {
		return nil, err
	}
	return &Gate{program: prg}, nil
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
