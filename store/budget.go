package store

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"

	"github.com/jackc/pgx/v5"

	"github.com/weftworks/weft/failure"
)

// Bounds of a budget.
const (
	MaxBudgetTokens  = 1_000_000_000_000
	MaxBudgetCostUSD = 1_000_000
	// costEpsilon absorbs float rounding when costs are compared.
	costEpsilon = 1e-9
)

// Budget bounds what a run's agent model calls may spend, in tokens (input
// and output together) and in US dollars. A nil field sets no bound.
type Budget struct {
	MaxCostUSD *float64 `json:"maxCostUsd,omitempty"`
	MaxTokens  *int64   `json:"maxTokens,omitempty"`
}

// IsZero reports a budget that bounds nothing.
func (b Budget) IsZero() bool { return b.MaxCostUSD == nil && b.MaxTokens == nil }

// Over is b with every field it leaves unset taken from defaults: an
// enqueue's budget over its workflow's default.
func (b Budget) Over(defaults Budget) Budget {
	if b.MaxCostUSD == nil {
		b.MaxCostUSD = defaults.MaxCostUSD
	}
	if b.MaxTokens == nil {
		b.MaxTokens = defaults.MaxTokens
	}
	return b
}

// Validate refuses bounds outside (0, MaxBudgetCostUSD] and
// 1..MaxBudgetTokens; field names the budget in the error.
func (b Budget) Validate(field string) error {
	if b.MaxCostUSD != nil {
		c := *b.MaxCostUSD
		if math.IsNaN(c) || c <= 0 || c > MaxBudgetCostUSD {
			return failure.New(failure.CodeInvalidRequest, "%s.maxCostUsd must be a number above 0 and at most %d", field, MaxBudgetCostUSD).
				WithDetails(map[string]any{"field": field + ".maxCostUsd"})
		}
	}
	if b.MaxTokens != nil && (*b.MaxTokens < 1 || *b.MaxTokens > MaxBudgetTokens) {
		return failure.New(failure.CodeInvalidRequest, "%s.maxTokens must be an integer from 1 to %d", field, int64(MaxBudgetTokens)).
			WithDetails(map[string]any{"field": field + ".maxTokens"})
	}
	return nil
}

// Equal reports whether a and b set the same bounds.
func (b Budget) Equal(o Budget) bool {
	eq := func(x, y *float64) bool { return (x == nil) == (y == nil) && (x == nil || *x == *y) }
	return eq(b.MaxCostUSD, o.MaxCostUSD) && (b.MaxTokens == nil) == (o.MaxTokens == nil) &&
		(b.MaxTokens == nil || *b.MaxTokens == *o.MaxTokens)
}

// BudgetKey names one model call of an agent node: (run, node, attempt,
// turn). An attempt re-dispatched after an infrastructure fault keeps its
// attempt number and makes the same turn again under the same key.
type BudgetKey struct {
	TenantID string
	RunID    string
	NodeID   string
	Attempt  int
	Turn     int
}

// TokenPrice is a model's price in US dollars per million tokens.
type TokenPrice struct {
	InputPerMTok  float64
	OutputPerMTok float64
}

// CallEstimate is what a model call is expected to use, as its provider
// tells it before the call.
type CallEstimate struct {
	// InputTokens the call sends (an estimate for a real model).
	InputTokens int64
	// OutputTokens the reply uses when the provider knows it in advance
	// (the sim); 0 when it cannot: the reply may then use up to the
	// call's output-token limit.
	OutputTokens int64
	// MaxOutputTokens is the agent's own cap on a reply (0: none).
	MaxOutputTokens int64
	// CostUSD is the call's cost when known in advance (the sim).
	CostUSD *float64
	// Price prices the call by its tokens (a priced model). With neither
	// CostUSD nor Price the call is unpriced: a cost budget refuses it.
	Price *TokenPrice
}

// Reservation is what one call holds of its run's budget until it is
// settled with the real usage (SaveAgentTranscript) or released.
type Reservation struct {
	// Budgeted is false when the run has no budget: nothing is reserved
	// and the call has no output-token limit.
	Budgeted bool
	// OutputLimit is the call's output-token limit: what the reservation
	// holds for its reply (0: none).
	OutputLimit int64
	// Tokens and CostUSD are reserved.
	Tokens  int64
	CostUSD float64
}

// BudgetExceededError says a run's budget cannot cover a call whatever
// the calls in flight return: it has spent too much already. Not retryable.
type BudgetExceededError struct {
	// Dimension is "tokens" or "costUsd": the bound the call breaks.
	Dimension      string
	AllowedTokens  *int64
	AllowedCostUSD *float64
	SpentTokens    int64
	SpentCostUSD   float64
	// NeededTokens and NeededCostUSD are the least the call needs.
	NeededTokens  int64
	NeededCostUSD float64
}

func (e *BudgetExceededError) Error() string {
	if e.Dimension == "costUsd" && e.AllowedCostUSD != nil {
		return fmt.Sprintf("budget exceeded: the run has spent $%s of its $%s and the next model call needs $%s",
			money(e.SpentCostUSD), money(*e.AllowedCostUSD), money(e.NeededCostUSD))
	}
	allowed := int64(0)
	if e.AllowedTokens != nil {
		allowed = *e.AllowedTokens
	}
	return fmt.Sprintf("budget exceeded: the run has spent %d of its %d tokens and the next model call needs %d",
		e.SpentTokens, allowed, e.NeededTokens)
}

func money(f float64) string { return strconv.FormatFloat(f, 'f', -1, 64) }

// ErrBudgetBusy says calls in flight hold the part of the budget a call
// needs: once they settle (returning what they did not use) it may fit.
var ErrBudgetBusy = errors.New("store: the budget is held by calls in flight")

// ErrBudgetUnpriced says a run with a cost budget asked to reserve for a
// call whose cost cannot be known (a model without a price).
var ErrBudgetUnpriced = errors.New("store: the call has no price, so a cost budget cannot bound it")

// ReserveBudget reserves, before a model call, what the call may use of
// its run's budget. Under the run row lock (so parallel agent nodes of one
// run never both take the last of it), it releases what earlier calls of
// the node left reserved (an attempt that failed or was lost), then:
//
//   - answers the call's own reservation when it holds one already (a
//     re-dispatched attempt making the same turn);
//   - refuses with *BudgetExceededError when what the run has spent plus
//     the least the call needs exceeds the budget;
//   - answers ErrBudgetBusy when only reservations in flight stand in the
//     way (the caller waits and asks again);
//   - otherwise reserves the input estimate plus the call's output-token
//     limit (the remaining tokens, or less when the reply's size is known
//     or capped) and the cost they can reach.
//
// A run without a budget reserves nothing (Reservation.Budgeted false). A
// call whose reservation was settled already is STALE_ATTEMPT.
func (s *Store) ReserveBudget(ctx context.Context, k BudgetKey, est CallEstimate) (Reservation, error) {
	if k.TenantID == "" || k.RunID == "" || k.NodeID == "" || k.Attempt < 1 || k.Turn < 1 || est.InputTokens < 0 ||
		est.OutputTokens < 0 || est.MaxOutputTokens < 0 {
		return Reservation{}, failure.New(failure.CodeInvalidRequest, "a budget reservation needs tenant, run, node, attempt, turn and a non-negative estimate")
	}
	// A budget is fixed at enqueue: a run without one never needs the lock.
	var budgeted bool
	err := s.Pool.QueryRow(ctx, `SELECT budget_max_tokens IS NOT NULL OR budget_max_cost_usd IS NOT NULL
		FROM runs WHERE run_id = $1 AND tenant_id = $2`, k.RunID, k.TenantID).Scan(&budgeted)
	if err != nil {
		return Reservation{}, fmt.Errorf("store: reserve budget: %w", notFound(err))
	}
	if !budgeted {
		return Reservation{}, nil
	}
	var res Reservation
	err = pgx.BeginFunc(ctx, s.Pool, func(tx pgx.Tx) error {
		var maxT *int64
		var maxC *float64
		var spentT int64
		var spentC float64
		err := tx.QueryRow(ctx, `SELECT budget_max_tokens, budget_max_cost_usd::float8,
				COALESCE((usage->>'totalTokens')::bigint, 0), COALESCE((usage->>'costUsd')::float8, 0)
			FROM runs WHERE run_id = $1 AND tenant_id = $2 FOR UPDATE`, k.RunID, k.TenantID).Scan(&maxT, &maxC, &spentT, &spentC)
		if err != nil {
			return notFound(err)
		}
		if maxT == nil && maxC == nil {
			return nil
		}
		if _, err := tx.Exec(ctx, `UPDATE run_budget_reservations SET state = 'released', updated_at = now()
			WHERE run_id = $1 AND node_id = $2 AND state = 'reserved' AND (attempt, turn) <> ($3, $4)`,
			k.RunID, k.NodeID, k.Attempt, k.Turn); err != nil {
			return err
		}
		var state string
		var own Reservation
		err = tx.QueryRow(ctx, `SELECT state, tokens, cost_usd::float8, output_limit FROM run_budget_reservations
			WHERE run_id = $1 AND node_id = $2 AND attempt = $3 AND turn = $4`, k.RunID, k.NodeID, k.Attempt, k.Turn).
			Scan(&state, &own.Tokens, &own.CostUSD, &own.OutputLimit)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
		case err != nil:
			return err
		case state == "reserved":
			own.Budgeted = true
			res = own
			return nil
		case state == "settled":
			return failure.New(CodeStaleAttempt, "turn %d of node %q attempt %d was settled already", k.Turn, k.NodeID, k.Attempt)
		}
		var heldT int64
		var heldC float64
		if err := tx.QueryRow(ctx, `SELECT COALESCE(sum(tokens), 0)::bigint, COALESCE(sum(cost_usd), 0)::float8
			FROM run_budget_reservations WHERE run_id = $1 AND state = 'reserved'`, k.RunID).Scan(&heldT, &heldC); err != nil {
			return err
		}
		planned, err := PlanReservation(Budget{MaxTokens: maxT, MaxCostUSD: maxC}, spentT, heldT, spentC, heldC, est)
		if err != nil {
			return err
		}
		res = planned
		_, err = tx.Exec(ctx, `INSERT INTO run_budget_reservations (tenant_id, run_id, node_id, attempt, turn, state, tokens,
				cost_usd, output_limit)
			VALUES ($1, $2, $3, $4, $5, 'reserved', $6, $7, $8)
			ON CONFLICT (run_id, node_id, attempt, turn) DO UPDATE SET state = 'reserved', tokens = EXCLUDED.tokens,
				cost_usd = EXCLUDED.cost_usd, output_limit = EXCLUDED.output_limit, spent_tokens = NULL,
				spent_cost_usd = NULL, updated_at = now()`,
			k.TenantID, k.RunID, k.NodeID, k.Attempt, k.Turn, res.Tokens, strconv.FormatFloat(res.CostUSD, 'f', -1, 64), res.OutputLimit)
		return err
	})
	var exceeded *BudgetExceededError
	switch {
	case err == nil:
		return res, nil
	case errors.As(err, &exceeded), errors.Is(err, ErrBudgetBusy), errors.Is(err, ErrBudgetUnpriced),
		failure.CodeOf(err) == CodeStaleAttempt:
		return Reservation{}, err
	}
	return Reservation{}, fmt.Errorf("store: reserve budget: %w", err)
}

// PlanReservation decides one reservation against budget b, given what the
// run has spent and what calls in flight hold (see ReserveBudget).
func PlanReservation(b Budget, spentT, heldT int64, spentC, heldC float64, est CallEstimate) (Reservation, error) {
	in := est.InputTokens
	known := est.OutputTokens > 0
	needOut := max(est.OutputTokens, 1)
	limit := int64(-1) // no output limit yet
	switch {
	case known:
		limit = est.OutputTokens
	case est.MaxOutputTokens > 0:
		limit = est.MaxOutputTokens
	}
	exceeded := func(dim string, needT int64, needC float64) error {
		return &BudgetExceededError{Dimension: dim, AllowedTokens: b.MaxTokens, AllowedCostUSD: b.MaxCostUSD,
			SpentTokens: spentT, SpentCostUSD: spentC, NeededTokens: needT, NeededCostUSD: needC}
	}
	price := func(inT, outT int64) float64 {
		if est.CostUSD != nil {
			return *est.CostUSD
		}
		if est.Price == nil {
			return 0
		}
		return (float64(inT)*est.Price.InputPerMTok + float64(outT)*est.Price.OutputPerMTok) / 1e6
	}
	needC := price(in, needOut)
	if b.MaxTokens != nil {
		maxT := *b.MaxTokens
		if spentT+in+needOut > maxT {
			return Reservation{}, exceeded("tokens", in+needOut, needC)
		}
		avail := maxT - spentT - heldT
		if in+needOut > avail {
			return Reservation{}, ErrBudgetBusy
		}
		if room := avail - in; limit < 0 || limit > room {
			limit = room
		}
	}
	if b.MaxCostUSD != nil {
		if est.CostUSD == nil && est.Price == nil {
			return Reservation{}, ErrBudgetUnpriced
		}
		maxC := *b.MaxCostUSD
		if spentC+needC > maxC+costEpsilon {
			return Reservation{}, exceeded("costUsd", in+needOut, needC)
		}
		availC := maxC - spentC - heldC
		if needC > availC+costEpsilon {
			return Reservation{}, ErrBudgetBusy
		}
		if !known && est.CostUSD == nil && est.Price.OutputPerMTok > 0 {
			room := int64(math.Floor((availC - float64(in)*est.Price.InputPerMTok/1e6) * 1e6 / est.Price.OutputPerMTok))
			room = max(room, needOut) // float rounding: needC fit, so needOut does
			if limit < 0 || limit > room {
				limit = room
			}
		}
	}
	res := Reservation{Budgeted: true, OutputLimit: max(limit, 0), Tokens: in + max(limit, 0)}
	res.CostUSD = price(in, max(limit, 0))
	return res, nil
}

// ReleaseBudget releases a call's reservation when the call failed (it is
// settled otherwise, by SaveAgentTranscript). Releasing twice, or a call
// that reserved nothing, changes nothing.
func (s *Store) ReleaseBudget(ctx context.Context, k BudgetKey) error {
	_, err := s.Pool.Exec(ctx, `UPDATE run_budget_reservations SET state = 'released', updated_at = now()
		WHERE run_id = $1 AND node_id = $2 AND attempt = $3 AND turn = $4 AND tenant_id = $5 AND state = 'reserved'`,
		k.RunID, k.NodeID, k.Attempt, k.Turn, k.TenantID)
	if err != nil {
		return fmt.Errorf("store: release budget: %w", err)
	}
	return nil
}

// settleReservation settles the reservation of turn t.Turn of t's node
// and attempt with its real usage, in the transaction that saves the turn.
func settleReservation(ctx context.Context, tx pgx.Tx, t AgentTranscript, u Usage) error {
	_, err := tx.Exec(ctx, `UPDATE run_budget_reservations SET state = 'settled', spent_tokens = $5, spent_cost_usd = $6,
			updated_at = now()
		WHERE run_id = $1 AND node_id = $2 AND attempt = $3 AND turn = $4 AND state = 'reserved'`,
		t.RunID, t.NodeID, t.Attempt, t.Turn, u.InputTokens+u.OutputTokens, strconv.FormatFloat(u.CostUSD, 'f', -1, 64))
	return err
}

// BudgetState is a run's budget and where it stands.
type BudgetState struct {
	Budget Budget
	// SpentTokens and SpentCostUSD are the run's usage totals;
	// ReservedTokens and ReservedCostUSD what calls in flight hold.
	SpentTokens     int64
	SpentCostUSD    float64
	ReservedTokens  int64
	ReservedCostUSD float64
}

// RunBudget returns the run's budget and what is spent and reserved of it.
// A run of another tenant is failure.ErrNotFound.
func (s *Store) RunBudget(ctx context.Context, tenantID, runID string) (BudgetState, error) {
	var b BudgetState
	err := s.Pool.QueryRow(ctx, `SELECT r.budget_max_tokens, r.budget_max_cost_usd::float8,
			COALESCE((r.usage->>'totalTokens')::bigint, 0), COALESCE((r.usage->>'costUsd')::float8, 0),
			COALESCE((SELECT sum(tokens) FROM run_budget_reservations WHERE run_id = r.run_id AND state = 'reserved'), 0)::bigint,
			COALESCE((SELECT sum(cost_usd) FROM run_budget_reservations WHERE run_id = r.run_id AND state = 'reserved'), 0)::float8
		FROM runs r WHERE r.run_id = $1 AND r.tenant_id = $2`, runID, tenantID).
		Scan(&b.Budget.MaxTokens, &b.Budget.MaxCostUSD, &b.SpentTokens, &b.SpentCostUSD, &b.ReservedTokens, &b.ReservedCostUSD)
	if err != nil {
		return BudgetState{}, fmt.Errorf("store: run budget of %s: %w", runID, notFound(err))
	}
	return b, nil
}
