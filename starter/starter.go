// Package starter is weft's execution capability: the ONE place that starts
// runs. The API, schedules, webhooks and the CLI all enqueue through it, so
// revision resolution, input validation, the permission check, idempotency
// and the Temporal start options are decided once (SPEC §5).
//
// Enqueue persists before it answers: the idempotency binding and the queued
// run row commit first, then the interpreter workflow starts under a
// deterministic workflow id with USE_EXISTING / REJECT_DUPLICATE policies, so
// repeating a start (a retried request, the sweeper) is always harmless.
package starter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/authz"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/store"
)

// Codes the starter adds to failure's shared set.
const (
	// CodeInvalidFixtures refuses simulation fixtures that are malformed,
	// over fixtures.MaxBytes, or name nodes the revision does not simulate
	// (details.errors lists {path, message}).
	CodeInvalidFixtures = "INVALID_FIXTURES"
)

// MaxIdempotencyKeyLen bounds an idempotency key, in characters.
const MaxIdempotencyKeyLen = 200

// SweepAfter is how long a run may stay queued before the sweeper starts it:
// long enough that it never races the enqueue that is starting it right now.
const SweepAfter = 30 * time.Second

// MaxInlineInput is the largest input carried inline in the workflow's
// parameters; a larger one is claim-checked (stored in PostgreSQL under the
// run and passed by reference) so no payload nears Temporal's limits.
const MaxInlineInput = 32 << 10

// MaxInputBytes bounds an enqueued input.
const MaxInputBytes = 1 << 20

// sweepBatch bounds one sweeper query.
const sweepBatch = 100

// Deps are the starter's collaborators.
type Deps struct {
	Store    *store.Store
	Temporal client.Client
	// TaskQueue is the queue the interpreter workers poll.
	TaskQueue string
	// UIURL is the Temporal Web UI base (for run links); Namespace is the
	// Temporal namespace runs live in.
	UIURL     string
	Namespace string
	Logger    *slog.Logger
	// Resolver builds the dependency snapshot a simulated draft is compiled
	// against; required. Pass publication's (the app wires one), so a
	// draft compiles here exactly as it would publish.
	Resolver *publication.Resolver
	// EagerStart asks Temporal to hand a run's first workflow task straight
	// back to a worker of this process (StartWorkflowOptions.
	// EnableEagerStart), saving the round trip through the task queue. Set
	// it only where a worker polls TaskQueue through the same client
	// (`weft dev`); otherwise the server just starts the run as usual.
	EagerStart bool
	// Durability goes into every run's parameters (config
	// WEFT_LEASE_TIMEOUT, WEFT_INFRA_MAX_*); zero fields take
	// execution.DefaultDurability.
	Durability execution.Durability
	// LeanInputs goes into every run's parameters
	// (execution.RunParams.LeanInputs, config WEFT_LEAN_INPUTS): set it only
	// once every worker runs a release that reads lean inputs.
	LeanInputs bool
}

// Starter enqueues, starts, sweeps and cancels runs.
type Starter struct {
	store     *store.Store
	temporal  client.Client
	taskQueue string
	uiURL     string
	namespace string
	log       *slog.Logger
	resolver  *publication.Resolver
	durable   execution.Durability
	eager     bool
	lean      bool
	pinned    *lru.Cache[pinnedKey, *pinned] // revisions.go
	reads     *readsCache                    // reads.go
}

// New returns a Starter. Store, Temporal, TaskQueue and Resolver are required.
func New(d Deps) (*Starter, error) {
	if d.Store == nil || d.Temporal == nil || d.TaskQueue == "" {
		return nil, errors.New("starter: Store, Temporal and TaskQueue are required")
	}
	if d.Resolver == nil {
		return nil, errors.New("starter: Resolver is required (the publication resolver drafts compile with)")
	}
	if d.Namespace == "" {
		d.Namespace = "default"
	}
	if d.Logger == nil {
		d.Logger = slog.Default()
	}
	return &Starter{
		store: d.Store, temporal: d.Temporal, taskQueue: d.TaskQueue,
		uiURL: strings.TrimRight(d.UIURL, "/"), namespace: d.Namespace,
		log: d.Logger.With("component", "starter"), resolver: d.Resolver,
		durable: d.Durability.WithDefaults(), eager: d.EagerStart, lean: d.LeanInputs, pinned: newPinnedCache(),
		reads: newReadsCache(),
	}, nil
}

// Request is what a caller asks to run. Nothing in it is trusted.
type Request struct {
	WorkflowKey string
	// Input is the invocation envelope, validated against the input node's schema.
	Input          json.RawMessage
	IdempotencyKey string
	// Mode defaults to live.
	Mode execution.Mode
	// Revision pins a published revision; nil (with no DraftRevision)
	// runs the latest one.
	Revision *int
	// DraftRevision (simulation only) runs that draft, compiled and stored
	// unpublished under (tenant, checksum).
	DraftRevision *int
	// Fixtures (simulation only) are what simulated nodes return; see
	// package fixtures.
	Fixtures json.RawMessage
	// DerivedFixtures says weft derived Fixtures from a recorded live run
	// itself (fixtures.FromRecording, for a replay): they are bounded by
	// fixtures.MaxRecordedBytes instead of fixtures.MaxBytes, since recorded
	// outputs reach claim-check sizes. The HTTP API never sets it: what a
	// client sends stays bounded by fixtures.MaxBytes.
	DerivedFixtures bool
	// ToolGrants (actionId@version) narrow what the run's agents may call:
	// a tool is offered only if it is also listed here. Nil grants no
	// narrowing; an empty list grants no tool. Part of the idempotency
	// binding: the same key with other grants is IDEMPOTENCY_CONFLICT.
	ToolGrants []string
	// Budget bounds what the run's agent model calls may spend; a field it
	// leaves unset takes the workflow's default budget. Nil (or empty)
	// gives none. Part of the idempotency binding: the same key with
	// another budget is IDEMPOTENCY_CONFLICT.
	Budget *store.Budget
}

// Trusted is who asks and with which permissions. It comes from the
// authenticated token or the configuring user of a schedule or webhook,
// never from a request body.
type Trusted struct {
	TenantID    string
	TenantName  string
	Actor       execution.Actor
	Origin      execution.Origin
	Permissions []string
	// ToolPolicy is a service actor's tool policy (schedules, webhooks):
	// its runs' agents are offered only those tools. Nil for a user; a
	// service actor without one is offered none. Stored with the run (a
	// policy widened later never reaches it) and not part of the
	// idempotency binding: a repeated firing answers the run it started.
	ToolPolicy []string
}

// Accepted is the answer to an enqueue.
type Accepted struct {
	RunID string
	// Status is queued (admitted, its start issued), throttled (waiting
	// for a slot under its limits), or whatever the bound run of a
	// repeated key has reached.
	Status string
	// Position is a throttled run's place in its workflow's queue (1 is
	// next); 0 otherwise.
	Position int
	Revision int
	Checksum string
	// Created is false when the idempotency key had already started this
	// run (the API answers 200 instead of 202).
	Created bool
	// WorkflowID is the run's Temporal workflow id.
	WorkflowID string
	// TemporalRunID is the run id of the workflow execution this call
	// started, or found started (a repeated key; for a run that has
	// finished, the one its row recorded): what `temporal workflow show -w
	// WorkflowID -r TemporalRunID` and a client waiting on the execution
	// need. Empty while nothing is started (throttled) or when the start
	// failed and is left to the sweeper.
	TemporalRunID string
}

// Enqueue validates req, binds its idempotency key to a new queued run (or
// finds the run the key already started) and starts the interpreter
// workflow. A failed start is logged and left to the sweeper: the run is
// durable once the row commits, so the caller still gets the run id.
//
// A key that is already bound is answered from its binding before the
// revision, the input schema or the permissions are looked at: the repeat
// asks for the run the key started, and a revision published since (whose
// schema might refuse the input, or whose nodes might need scopes the
// caller lacks) must not turn it into a refusal. sameRequest decides
// whether it is the same request; otherwise it is IDEMPOTENCY_CONFLICT.
func (s *Starter) Enqueue(ctx context.Context, req Request, tc Trusted) (Accepted, error) {
	growEnqueueStack() // one growth for the whole enqueue (stack.go)
	if err := checkTrusted(tc); err != nil {
		return Accepted{}, err
	}
	mode, err := checkRequest(&req)
	if err != nil {
		return Accepted{}, err
	}
	if req.ToolGrants, err = authz.ParseTools("toolGrants", req.ToolGrants); err != nil {
		return Accepted{}, err
	}
	if tc.ToolPolicy, err = authz.ParseTools("toolPolicy", tc.ToolPolicy); err != nil {
		return Accepted{}, failure.Wrap(err, failure.CodeInternal, "starter: the service actor's tool policy is malformed")
	}
	if req.Budget, err = checkBudget(req.Budget); err != nil {
		return Accepted{}, err
	}
	input, err := normalizeInput(req.Input)
	if err != nil {
		return Accepted{}, err
	}
	if len(input) > MaxInputBytes {
		return Accepted{}, failure.New(failure.CodeDocumentTooLarge, "input exceeds %d bytes", MaxInputBytes)
	}
	hash, err := InputHash(input)
	if err != nil {
		// e.g. a lone UTF-16 surrogate escape, which RFC 8785 (I-JSON) forbids.
		return Accepted{}, failure.Wrap(err, failure.CodeInvalidInput, "input cannot be canonicalized (RFC 8785): it is not I-JSON")
	}
	// What the checks below need: the binding, the revision with its
	// workflow and limits, the actor's revocations (a live run's
	// permission check). A published revision decides from the reads
	// cache first (reads.go): its statement then checks that nothing it
	// was decided with changed, so the enqueue is one round trip. Fresh
	// reads are one round trip more (a bound key still uses none but the
	// binding) and decide every refusal.
	lookup := store.EnqueueLookup{TenantID: tc.TenantID, WorkflowKey: req.WorkflowKey,
		IdempotencyKey: req.IdempotencyKey, Revision: req.Revision}
	if mode == execution.ModeLive {
		lookup.RevokedOf = tc.Actor.RequestedBy()
	}
	var reads store.EnqueueReads
	cached := false
	if req.DraftRevision == nil {
		reads, cached = s.reads.lookup(lookup)
	}
	for freshReads := 0; ; {
		if !cached {
			freshReads++
			if reads, err = s.store.ReadForEnqueue(ctx, lookup); err != nil {
				return Accepted{}, fmt.Errorf("starter: look up idempotency binding, revision, limits and revocations: %w", err)
			}
			s.reads.remember(lookup, reads)
			if reads.BoundOK {
				return s.repeat(ctx, reads.Bound, hash, mode, req, tc)
			}
		}
		acc, err := s.enqueueWith(ctx, reads, lookup, input, hash, mode, req, tc)
		switch {
		case err == nil:
			return acc, nil
		case cached:
			// Decided from the cache: whatever the answer, fresh reads
			// decide again (a refusal may be the cache's, or the key may
			// be bound already).
			cached = false
		case errors.Is(err, store.ErrEnqueueReadsChanged) && freshReads < maxFreshAttempts:
			// Changed between the reads and the statement: read again.
		case errors.Is(err, store.ErrEnqueueReadsChanged):
			return Accepted{}, failure.Wrap(err, failure.CodeUnavailable,
				"workflow %q's revision, limits or the caller's revocations changed during each of %d attempts; retry", req.WorkflowKey, maxFreshAttempts)
		default:
			return Accepted{}, err
		}
	}
}

// enqueueWith decides the enqueue from reads (fresh, or from the cache
// with BoundOK false) and writes the run with the expectation that reads
// still hold (store.ErrEnqueueReadsChanged otherwise), then starts it.
func (s *Starter) enqueueWith(ctx context.Context, reads store.EnqueueReads, lookup store.EnqueueLookup,
	input json.RawMessage, hash string, mode execution.Mode, req Request, tc Trusted) (Accepted, error) {
	var rev store.Revision
	var p *pinned
	var err error
	if req.DraftRevision != nil {
		var draft *graph.Compiled
		if draft, err = s.compileDraft(ctx, tc.TenantID, tc.Permissions, req.WorkflowKey, *req.DraftRevision); err == nil {
			p, err = pin(draft)
		}
	} else {
		rev, p, err = s.resolve(ctx, tc.TenantID, req.WorkflowKey, req.Revision, reads)
	}
	if err != nil {
		return Accepted{}, err
	}
	compiled := p.compiled
	if err := validateInput(p, input); err != nil {
		return Accepted{}, err
	}
	// A live run needs every node's permissions in the snapshot. A
	// simulation calls nothing (no provider, action or business write), so
	// the runs.execute scope of the route is all it needs.
	// The snapshot is checked as it stands now: minus what was revoked
	// from the acting principal (the user, or a service actor's creator).
	var fx json.RawMessage
	if mode == execution.ModeLive {
		if err := checkPermissions(compiled, authz.Effective(tc.Permissions, reads.Revoked)); err != nil {
			return Accepted{}, err
		}
	} else if fx, err = checkFixtures(compiled, req.Fixtures, fixtureLimit(req)); err != nil {
		return Accepted{}, err
	}

	// The workflow's default budget fills what the request's leaves unset.
	wl := reads.Limits
	if !reads.WorkflowFound {
		// Only a draft gets here without its workflow read (a published
		// revision implies it): one created since the batch read it is
		// read again, so the answer is the one a later read would give.
		if wl, err = s.store.GetWorkflowLimits(ctx, tc.TenantID, req.WorkflowKey); err != nil {
			return Accepted{}, fmt.Errorf("starter: read workflow limits: %w", err)
		}
	}
	var budget store.Budget
	if req.Budget != nil {
		budget = *req.Budget
	}
	run := store.Run{
		RequestedBudget: req.Budget,
		Budget:          budget.Over(wl.Budget),
		RunID:           uuid.NewString(),
		TenantID:        tc.TenantID,
		TenantName:      tc.TenantName,
		WorkflowKey:     req.WorkflowKey,
		Revision:        rev.Revision, // 0 for a simulated draft
		DraftRevision:   req.DraftRevision,
		Checksum:        compiled.Checksum,
		Mode:            string(mode),
		Fixtures:        fx,
		Status:          execution.StatusQueued,
		Input:           input,
		InputHash:       hash,
		Origin:          tc.Origin,
		Actor:           tc.Actor,
		Permissions:     nonNil(tc.Permissions),
		ToolGrants:      req.ToolGrants,
		ToolPolicy:      tc.ToolPolicy,
		WorkflowID:      WorkflowID(tc.TenantID, req.WorkflowKey, req.IdempotencyKey),
	}
	// A published revision's run is written only if what it was decided
	// with still holds when the statement runs. A draft's is decided from
	// fresh reads alone (its compile reads the store anyway) and written
	// as before.
	var expect *store.EnqueueExpect
	if req.DraftRevision == nil {
		expect = &store.EnqueueExpect{NamedRevision: req.Revision, DefaultBudget: wl.Budget,
			RevokedOf: lookup.RevokedOf, Revoked: reads.Revoked}
	}
	enq, err := s.store.EnqueueRunExpecting(ctx, run, req.IdempotencyKey, expect)
	if errors.Is(err, store.ErrEnqueueReadsChanged) {
		return Accepted{}, err
	}
	if err != nil {
		return Accepted{}, fmt.Errorf("starter: create run: %w", err)
	}
	if !enq.Created {
		// The key was bound already: by a concurrent enqueue since the
		// fresh reads, or before a decision from the cache.
		return s.repeat(ctx, enq.Run, hash, mode, req, tc)
	}
	// The enqueue's admission pass may have admitted runs waiting before
	// this one too: this enqueue starts them, its own run first.
	acc := s.issue(ctx, enq.Run, tc, true)
	var others []store.Run
	for _, r := range enq.Admitted {
		if r.RunID != enq.Run.RunID {
			others = append(others, r)
		}
	}
	s.startAdmitted(ctx, others)
	return acc, nil
}

// repeat answers an enqueue whose idempotency key is already bound: the
// bound run (Created=false) when it asks for the same thing, else
// IDEMPOTENCY_CONFLICT.
func (s *Starter) repeat(ctx context.Context, bound store.Run, hash string, mode execution.Mode, req Request, tc Trusted) (Accepted, error) {
	if err := sameRequest(bound, hash, mode, req); err != nil {
		return Accepted{}, err
	}
	return s.issue(ctx, bound, tc, false), nil
}

// issue starts a bound run and answers for it. The start is issued even
// for an existing binding: if the first start failed, this repeat is what
// starts the run; if it succeeded, the policies make this a no-op. A run
// still throttled is never started here: a repeat asks the dispatcher
// instead, which starts it only if a slot is free for it now.
func (s *Starter) issue(ctx context.Context, bound store.Run, tc Trusted, created bool) Accepted {
	var temporalRunID string
	switch {
	case bound.Status == execution.StatusThrottled && !created:
		if _, err := s.Dispatch(ctx, bound.TenantID); err != nil {
			s.log.Warn("dispatch failed; the sweeper will retry", "run", bound.RunID, "tenant", bound.TenantID, "err", err)
		}
		if latest, err := s.store.GetRun(ctx, bound.TenantID, bound.RunID); err == nil {
			bound = latest
		}
	case bound.Status == execution.StatusThrottled, execution.Terminal(bound.Status):
		// Waiting for the dispatcher, or finished: nothing to start.
	default:
		var err error
		if temporalRunID, err = s.start(ctx, bound); err != nil {
			s.log.Warn("start failed; the sweeper will retry", "run", bound.RunID, "workflowId", bound.WorkflowID, "err", err)
		}
	}
	if s.log.Enabled(ctx, slog.LevelInfo) { // its 11 attributes are built only to be logged
		s.log.Info("run enqueued", "run", bound.RunID, "workflowId", bound.WorkflowID, "tenant", bound.TenantID,
			"workflowKey", bound.WorkflowKey, "revision", bound.Revision, "mode", bound.Mode, "origin", tc.Origin.Kind,
			"actor", tc.Actor.Sub, "created", created, "status", bound.Status, "position", bound.Position)
	}
	if temporalRunID == "" {
		temporalRunID = bound.TemporalRunID // finished, or started and recorded before
	}
	return Accepted{RunID: bound.RunID, Status: bound.Status, Position: bound.Position, Revision: bound.Revision,
		Checksum: bound.Checksum, Created: created, WorkflowID: bound.WorkflowID, TemporalRunID: temporalRunID}
}

// checkTrusted catches wiring mistakes: a trusted context without tenant,
// actor or origin would run with nobody accountable.
func checkTrusted(tc Trusted) error {
	if tc.TenantID == "" || tc.Actor.Sub == "" || tc.Actor.Kind == "" || tc.Origin.Kind == "" {
		return failure.New(failure.CodeInternal, "starter: trusted context needs tenant, actor and origin")
	}
	return nil
}

// checkRequest validates the shape of req and returns its mode.
func checkRequest(req *Request) (execution.Mode, error) {
	if strings.TrimSpace(req.WorkflowKey) == "" {
		return "", failure.New(failure.CodeInvalidRequest, "workflow key is required")
	}
	if req.IdempotencyKey == "" {
		return "", failure.New(failure.CodeInvalidRequest, "idempotencyKey is required")
	}
	if !utf8.ValidString(req.IdempotencyKey) || utf8.RuneCountInString(req.IdempotencyKey) > MaxIdempotencyKeyLen {
		return "", failure.New(failure.CodeInvalidRequest, "idempotencyKey must be valid UTF-8 of at most %d characters", MaxIdempotencyKeyLen)
	}
	mode := req.Mode
	if mode == "" {
		mode = execution.ModeLive
	}
	switch mode {
	case execution.ModeLive:
		// Live runs execute published revisions only (SPEC §4).
		if req.DraftRevision != nil {
			return "", failure.New(failure.CodeInvalidRequest, "draftRevision runs a draft in simulation mode; live runs need a published revision")
		}
		if f := strings.TrimSpace(string(req.Fixtures)); f != "" && f != "null" {
			return "", failure.New(failure.CodeInvalidRequest, "fixtures apply to simulation mode only")
		}
	case execution.ModeSimulation:
	default:
		return "", failure.New(failure.CodeInvalidRequest, "mode must be %q or %q", execution.ModeLive, execution.ModeSimulation)
	}
	if req.Revision != nil && req.DraftRevision != nil {
		return "", failure.New(failure.CodeInvalidRequest, "give revision or draftRevision, not both")
	}
	if req.Revision != nil && *req.Revision < 1 {
		return "", failure.New(failure.CodeInvalidRequest, "revision must be a positive integer")
	}
	if req.DraftRevision != nil && *req.DraftRevision < 1 {
		return "", failure.New(failure.CodeInvalidRequest, "draftRevision must be a positive integer")
	}
	return mode, nil
}

// resolve finds the revision to run, the one named or the latest
// published, in what ReadForEnqueue read. Absent, it is a 404 for a
// missing workflow or revision, NOT_PUBLISHED for a workflow never
// published.
func (s *Starter) resolve(ctx context.Context, tenant, key string, n *int, reads store.EnqueueReads) (store.Revision, *pinned, error) {
	switch {
	case reads.RevisionFound:
	case n != nil:
		return store.Revision{}, nil, failure.New(failure.CodeNotFound, "workflow %q has no published revision %d", key, *n)
	case !reads.WorkflowFound:
		return store.Revision{}, nil, failure.New(failure.CodeNotFound, "workflow %q not found", key)
	default:
		return store.Revision{}, nil, failure.New(failure.CodeNotPublished, "workflow %q has no published revision; publish it first", key)
	}
	p, err := s.pinnedRevision(ctx, tenant, reads.Revision.Checksum) // revisions.go
	if err != nil {
		return store.Revision{}, nil, err
	}
	return reads.Revision, p, nil
}

// sameRequest decides whether a repeated idempotency key asks for the run
// it is bound to. A newer publish does not matter (the key stays bound to
// what it started); other input, another mode, another explicitly named
// revision or draft revision, other fixtures, other toolGrants or another
// budget do.
func sameRequest(bound store.Run, hash string, mode execution.Mode, req Request) error {
	var why string
	switch {
	case bound.InputHash != hash:
		why = "other input"
	case bound.Mode != string(mode):
		why = "another mode"
	case req.Revision != nil && (*req.Revision != bound.Revision || bound.DraftRevision != nil):
		why = "another revision"
	case req.DraftRevision != nil && (bound.DraftRevision == nil || *req.DraftRevision != *bound.DraftRevision):
		why = "another draft revision"
	case mode == execution.ModeSimulation && !sameFixtures(bound.Fixtures, req.Fixtures):
		why = "other fixtures"
	case !authz.SameTools(bound.ToolGrants, req.ToolGrants):
		why = "other toolGrants"
	case !sameBudget(bound.RequestedBudget, req.Budget):
		why = "another budget"
	default:
		return nil
	}
	return failure.New(failure.CodeIdempotencyConflict, "this idempotency key already started run %s with %s", bound.RunID, why).
		WithDetails(map[string]any{"runId": bound.RunID})
}

// start issues the Temporal start for a run row. The options are the whole
// idempotency story on the Temporal side: USE_EXISTING returns the running
// workflow, REJECT_DUPLICATE refuses to run a closed one again. Everything
// in the parameters comes from the row (the tenant name included), so
// every start of a run, the sweeper's too, passes the same ones. It
// returns the run id of the execution started or found running.
func (s *Starter) start(ctx context.Context, run store.Run) (string, error) {
	if run.Status == execution.StatusThrottled {
		// Only the dispatcher admits a run; a throttled row never starts.
		return "", fmt.Errorf("run %s is throttled: it starts when the dispatcher admits it", run.RunID)
	}
	input, err := s.inputValue(ctx, run)
	if err != nil {
		return "", err
	}
	durable := s.durable
	params := execution.RunParams{
		TenantID:    run.TenantID,
		TenantName:  run.TenantName,
		RunID:       run.RunID,
		WorkflowKey: run.WorkflowKey,
		Revision:    run.Revision,
		Checksum:    run.Checksum,
		Mode:        execution.Mode(run.Mode),
		Input:       input,
		Actor:       run.Actor,
		Origin:      run.Origin,
		Permissions: nonNil(run.Permissions),
		EnqueuedAt:  run.CreatedAt,
		Durability:  &durable,
		LeanInputs:  s.lean,
	}
	opts := StartOptions(run, s.taskQueue, s.eager)
	// The run row learns its Temporal run id from the interpreter's first
	// append (RunUpdate.TemporalRunID), not from a write here. The SDK's
	// payload visitor needs ~24 KiB of stack: taken in one growth (stack.go).
	growStack()
	wr, err := s.temporal.ExecuteWorkflow(ctx, opts, execution.WorkflowName, params)
	if err != nil {
		return "", err
	}
	return wr.GetRunID(), nil
}

// StartOptions are the options a run's workflow starts with: its id (one
// execution per binding however often it is started), the run's search
// attributes (SPEC §8), and the summary and details the Web UI shows.
// weftbench starts with them too, to tell their cost from weft's own.
func StartOptions(run store.Run, taskQueue string, eager bool) client.StartWorkflowOptions {
	return client.StartWorkflowOptions{
		ID:                       run.WorkflowID,
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes: temporal.NewSearchAttributes(
			execution.KeyTenant.ValueSet(run.TenantID),
			execution.KeyWorkflowKey.ValueSet(run.WorkflowKey),
			execution.KeyMode.ValueSet(run.Mode),
			execution.KeyRevision.ValueSet(int64(run.Revision)),
		),
		EnableEagerStart: eager,
		StaticSummary:    runSummary(run),
		StaticDetails:    fmt.Sprintf("run %s · origin %s · actor %s", run.RunID, run.Origin.Kind, run.Actor.Sub),
	}
}

// inputValue is the run input as the workflow receives it: inline, or a
// claim-check reference under (tenant, run, input node, "out") when large.
// Storing is idempotent, so every start of the run may do it again.
func (s *Starter) inputValue(ctx context.Context, run store.Run) (execution.Value, error) {
	if len(run.Input) <= MaxInlineInput {
		return execution.Value{Inline: run.Input}, nil
	}
	p, err := s.pinnedRevision(ctx, run.TenantID, run.Checksum)
	if err != nil {
		return execution.Value{}, err
	}
	ref, err := s.store.PutValue(ctx, run.TenantID, run.RunID, p.inputNode, "out", run.Input)
	if err != nil {
		return execution.Value{}, fmt.Errorf("store large input: %w", err)
	}
	return execution.Value{Ref: &ref}, nil
}

// Summary is the run's Temporal UI summary: "<key> r<rev> · <mode>".
func Summary(workflowKey string, revision int, mode execution.Mode) string {
	return fmt.Sprintf("%s r%d · %s", workflowKey, revision, mode)
}

// WorkflowURL links a run's workflow in the Temporal Web UI. It addresses
// the workflow id alone, which survives continue-as-new.
func (s *Starter) WorkflowURL(workflowID string) string {
	if s == nil || s.uiURL == "" {
		return ""
	}
	return s.uiURL + "/namespaces/" + s.namespace + "/workflows/" + workflowID
}

// Sweep starts runs still queued SweepAfter after their admission: their
// first start failed (Temporal unavailable, the process died between
// commit and start). It first dispatches every tenant with throttled runs,
// so no slot stays unused when a dispatcher missed its settlement. It
// returns how many starts of queued runs it issued successfully (the
// dispatch starts what it admits itself).
func (s *Starter) Sweep(ctx context.Context) (int, error) {
	started := 0
	var errs []error
	// The safety net of the dispatcher: a slot freed while no dispatcher
	// listened (or whose notification was lost) is found here.
	tenants, err := s.store.ThrottledTenants(ctx, sweepBatch)
	if err != nil {
		errs = append(errs, fmt.Errorf("list throttled tenants: %w", err))
	}
	for _, t := range tenants {
		if _, err := s.Dispatch(ctx, t); err != nil {
			errs = append(errs, fmt.Errorf("dispatch tenant %s: %w", t, err))
		}
	}
	runs, err := s.store.QueuedRuns(ctx, SweepAfter, sweepBatch)
	if err != nil {
		return 0, fmt.Errorf("starter: list queued runs: %w", errors.Join(append(errs, err)...))
	}
	for _, r := range runs {
		if _, err := s.start(ctx, r); err != nil {
			errs = append(errs, fmt.Errorf("run %s: %w", r.RunID, err))
			continue
		}
		started++
	}
	if len(errs) > 0 {
		return started, fmt.Errorf("starter: sweep: %w", errors.Join(errs...))
	}
	return started, nil
}

// RunSweeper calls Sweep every interval until ctx ends. Every API and
// worker replica may run it: starts are idempotent, so sweepers never
// need to coordinate.
func (s *Starter) RunSweeper(ctx context.Context, every time.Duration) {
	if every <= 0 {
		every = 10 * time.Second
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n, err := s.Sweep(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("sweep failed", "started", n, "err", err)
		} else if n > 0 {
			s.log.Info("sweeper started queued runs", "started", n)
		}
	}
}

// Cancel requests cancellation of a run. The interpreter does the work
// (durable, cooperative; SPEC §5); this only delivers the request to the
// workflow id with an empty run id, so it reaches whatever run of the chain
// is current after a continue-as-new. A throttled run is cancelled here
// and never starts.
func (s *Starter) Cancel(ctx context.Context, tenantID, runID string, by execution.Actor) error {
	run, err := s.store.GetRun(ctx, tenantID, runID)
	if errors.Is(err, failure.ErrNotFound) {
		return failure.New(failure.CodeNotFound, "run %q not found", runID)
	}
	if err != nil {
		return fmt.Errorf("starter: get run: %w", err)
	}
	if execution.Terminal(run.Status) {
		return failure.New(failure.CodeRunNotActive, "run %s is already %s", run.RunID, run.Status).
			WithDetails(map[string]any{"status": run.Status})
	}
	reason := "cancelled by " + by.Kind + " " + by.Sub
	if run.Status == execution.StatusThrottled {
		// Never started and holding no slot: it leaves the queue without
		// starting, unless the dispatcher admitted it meanwhile.
		done, err := s.store.CancelThrottled(ctx, tenantID, runID,
			execution.RunError{Code: execution.RunErrCancelled, Message: reason + " while it waited for a slot (throttled); it never started"},
			map[string]any{"by": by, "throttled": true})
		if err != nil {
			return fmt.Errorf("starter: cancel throttled run: %w", err)
		}
		if done {
			s.log.Info("throttled run cancelled", "run", run.RunID, "by", by.Sub, "kind", by.Kind)
			return nil
		}
		if run, err = s.store.GetRun(ctx, tenantID, runID); err != nil {
			return fmt.Errorf("starter: get run: %w", err)
		}
		if execution.Terminal(run.Status) {
			return failure.New(failure.CodeRunNotActive, "run %s is already %s", run.RunID, run.Status).
				WithDetails(map[string]any{"status": run.Status})
		}
	}
	err = s.cancel(ctx, run.WorkflowID, reason)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) && run.Status == execution.StatusQueued {
		// Admitted but never started: start it (within its limits: it
		// holds its slot) so the cancellation goes through the interpreter
		// like any other (it sees the request before running a node and
		// records the cancelled outcome in the event log).
		if _, err := s.start(ctx, run); err != nil {
			return failure.Wrap(err, failure.CodeUnavailable, "run %s could not be reached to cancel it", run.RunID)
		}
		err = s.cancel(ctx, run.WorkflowID, reason)
	}
	if errors.As(err, &nf) {
		// Temporal has closed the workflow; the row just has not caught up.
		return failure.New(failure.CodeRunNotActive, "run %s has already finished", run.RunID)
	}
	if err != nil {
		return failure.Wrap(err, failure.CodeUnavailable, "cancel request for run %s failed", run.RunID)
	}
	s.log.Info("cancel requested", "run", run.RunID, "workflowId", run.WorkflowID, "by", by.Sub, "kind", by.Kind)
	return nil
}

func (s *Starter) cancel(ctx context.Context, workflowID, reason string) error {
	return s.temporal.CancelWorkflowWithOptions(ctx, client.CancelWorkflowOptions{WorkflowID: workflowID, Reason: reason})
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
