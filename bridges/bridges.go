// Package bridges starts runs from outside the API (SPEC §8): Temporal
// Schedules whose action is the small ScheduledEnqueue workflow, and signed
// webhooks. Both enqueue through the starter — the one place that starts
// runs — as a service actor, so their runs get the same run row,
// idempotency and permission checks as any other.
//
// The service actor rule: a schedule or webhook keeps its creator's scope
// snapshot; at every firing or delivery its effective permissions are that
// snapshot minus the creator's rows in `revocations`, and its explicit tool
// policy (the only tools its runs' agents may be offered; none by default)
// must still be covered by them (policy.go). A firing that lacks a
// needed scope (or that the starter refuses for any other stable reason) is
// not run: the refusal is recorded in `bridge_refusals` as evidence and
// listed with the schedule or webhook.
package bridges

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base32"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/authz"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
)

// RequiredScopes are what a service actor needs beyond the workflow's node
// permissions: the creator must have been allowed to run the workflow
// themselves, and revoking runs.execute from them stops their bridges.
var RequiredScopes = []string{auth.ScopeRunsExecute}

// Effective is the service actor rule: the snapshot minus the revoked
// scopes, sorted and without duplicates (authz.Effective).
func Effective(snapshot, revoked []string) []string { return authz.Effective(snapshot, revoked) }

// Refusal is the evidence of a refused firing or delivery, as shown by the API.
type Refusal struct {
	At        time.Time       `json:"at"`
	FiringKey string          `json:"firingKey"`
	Code      string          `json:"code"`
	Message   string          `json:"message"`
	Missing   []string        `json:"missing"`
	Details   json.RawMessage `json:"details,omitempty"`
}

func refusalView(r store.Refusal) *Refusal {
	return &Refusal{At: r.CreatedAt, FiringKey: r.FiringKey, Code: r.Code, Message: r.Message,
		Missing: r.Missing, Details: r.Details}
}

// Enqueuer enqueues runs as a bridge's service actor. The worker's
// EnqueueScheduled activity and the API's webhook route both use it.
type Enqueuer struct {
	store   *store.Store
	starter *starter.Starter
	// vars resolves templated schedule input: the production registry,
	// the one graph validation and activities use.
	vars *variables.Registry
	log  *slog.Logger
}

// NewEnqueuer returns an Enqueuer; store, starter and the variable
// registry (templated schedule input resolves against it) are required.
func NewEnqueuer(st *store.Store, s *starter.Starter, vars *variables.Registry, logger *slog.Logger) (*Enqueuer, error) {
	if st == nil || s == nil {
		return nil, errors.New("bridges: Store and Starter are required")
	}
	if vars == nil {
		return nil, errors.New("bridges: the variable registry is required")
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Enqueuer{store: st, starter: s, vars: vars, log: logger.With("component", "bridges")}, nil
}

// serviceActor is a bridge as the starter sees it.
type serviceActor struct {
	kind        string // store.BridgeSchedule or store.BridgeWebhook
	id          string
	tenantID    string
	tenantName  string
	workflowKey string
	createdBy   string
	scopes      []string
	// toolPolicy is the bridge's tool policy as read for this firing.
	toolPolicy []string
	// resolve, when set, turns the input into the one the run receives,
	// once the service actor's permissions are known (a templated
	// schedule's input); a refusal is a *failure.Error.
	resolve func(ctx context.Context, perms []string) (json.RawMessage, error)
}

// refusedError marks an enqueue the bridge refused (and recorded) rather
// than failed to attempt: a stable coded refusal, never retried.
type refusedError struct {
	fe *failure.Error
}

func (e *refusedError) Error() string { return e.fe.Error() }
func (e *refusedError) Unwrap() error { return e.fe }

// isRefusal tells a stable refusal (bad input, missing scope, unpublished
// workflow, conflicting key) from a failure worth retrying (PostgreSQL or
// Temporal unavailable, an unclassified error).
func isRefusal(err error) (*failure.Error, bool) {
	var fe *failure.Error
	if !errors.As(err, &fe) {
		return nil, false
	}
	switch fe.Code {
	case failure.CodeInternal, failure.CodeUnavailable:
		return nil, false
	}
	return fe, true
}

// enqueue runs the service actor rule and enqueues through the starter. A
// refusal is recorded under firingKey and returned as *refusedError
// wrapping the coded error; other errors are returned as they are.
func (e *Enqueuer) enqueue(ctx context.Context, a serviceActor, input json.RawMessage, firingKey string) (starter.Accepted, error) {
	revoked, err := e.store.RevokedScopes(ctx, a.tenantID, a.createdBy)
	if err != nil {
		return starter.Accepted{}, err
	}
	perms := Effective(a.scopes, revoked)
	var enqErr error
	acc := starter.Accepted{}
	if missing := auth.Missing(perms, RequiredScopes); len(missing) > 0 {
		enqErr = failure.New(failure.CodePermissionDenied,
			"the %s's creator %s no longer holds %s", a.kind, a.createdBy, strings.Join(missing, ", ")).
			WithDetails(map[string]any{"missing": missing})
	} else if enqErr = e.firingPolicyError(ctx, a, perms); enqErr != nil {
		// a refusal (recorded below), or a catalog read to retry
	} else if input, enqErr = e.resolvedInput(ctx, a, perms, input); enqErr != nil {
		// a refusal (recorded below), or a source failure to retry
	} else {
		acc, enqErr = e.starter.Enqueue(ctx, starter.Request{
			WorkflowKey:    a.workflowKey,
			Input:          input,
			IdempotencyKey: firingKey,
		}, starter.Trusted{
			TenantID:    a.tenantID,
			TenantName:  a.tenantName,
			Actor:       execution.Actor{Kind: "service", Sub: a.kind + ":" + a.id, ConfiguredBy: a.createdBy},
			Origin:      execution.Origin{Kind: a.kind, ID: a.id},
			Permissions: perms,
			ToolPolicy:  nonNilList(a.toolPolicy),
		})
	}
	if enqErr == nil {
		return acc, nil
	}
	fe, ok := isRefusal(enqErr)
	if !ok {
		return starter.Accepted{}, enqErr
	}
	if err := e.store.RecordRefusal(ctx, refusalRow(a, firingKey, fe)); err != nil {
		return starter.Accepted{}, fmt.Errorf("bridges: record refusal: %w", err)
	}
	e.log.Warn("bridge firing refused", "kind", a.kind, "id", a.id, "tenant", a.tenantID,
		"firingKey", firingKey, "code", fe.Code, "message", fe.Message)
	return starter.Accepted{}, &refusedError{fe: fe}
}

// resolvedInput is the input the run receives: input itself, or for a
// templated schedule the result of a.resolve.
func (e *Enqueuer) resolvedInput(ctx context.Context, a serviceActor, perms []string, input json.RawMessage) (json.RawMessage, error) {
	if a.resolve == nil {
		return input, nil
	}
	return a.resolve(ctx, perms)
}

// nonNilList keeps a service actor's policy a list even when empty: an
// empty policy offers no tool, it does not mean "not narrowed".
func nonNilList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

func refusalRow(a serviceActor, firingKey string, fe *failure.Error) store.Refusal {
	r := store.Refusal{TenantID: a.tenantID, BridgeKind: a.kind, BridgeID: a.id, FiringKey: firingKey,
		Code: fe.Code, Message: fe.Message}
	if m, ok := fe.Details["missing"].([]string); ok {
		r.Missing = m
	}
	if len(fe.Details) > 0 {
		if d, err := json.Marshal(fe.Details); err == nil {
			r.Details = d
		}
	}
	return r
}

// IDs: a prefix and 15 random bytes in lowercase base32 (24 characters).
const (
	schedulePrefix = "sch_"
	webhookPrefix  = "whk_"
)

var (
	idEncoding        = base32.StdEncoding.WithPadding(base32.NoPadding)
	scheduleIDPattern = regexp.MustCompile(`^sch_[a-z2-7]{24}$`)
	webhookIDPattern  = regexp.MustCompile(`^whk_[a-z2-7]{24}$`)
)

func newID(prefix string) string {
	b := make([]byte, 15)
	_, _ = rand.Read(b) // crypto/rand.Read never fails (Go 1.24+)
	return prefix + strings.ToLower(idEncoding.EncodeToString(b))
}

// TemporalScheduleID is the id of a schedule's Temporal Schedule:
// weft-sched-<first 16 hex of sha256(tenant)>-<schedule id>. The hash keeps
// tenant names out of ids shown in the Temporal UI while keeping two
// tenants' schedules apart.
func TemporalScheduleID(tenantID, scheduleID string) string {
	h := sha256.Sum256([]byte(tenantID))
	return "weft-sched-" + hex.EncodeToString(h[:8]) + "-" + scheduleID
}

func notFoundAs(err error, format string, args ...any) error {
	if errors.Is(err, failure.ErrNotFound) {
		return failure.New(failure.CodeNotFound, format, args...)
	}
	return err
}
