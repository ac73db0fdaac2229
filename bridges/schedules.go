package bridges

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
	"github.com/weftworks/weft/variables"
)

// Schedule policies (documented in README):
//
//   - Overlap BUFFER_ONE: the action only enqueues (milliseconds), so
//     firings overlap only while an enqueue is retrying through an outage;
//     then one firing waits and later ones are skipped instead of piling up.
//     Runs themselves are separate workflows and may overlap freely: each
//     firing is its own run, keyed by its scheduled time.
//   - CatchupWindow 1 h: firings missed while Temporal was down for less
//     than an hour still happen (at most one buffered, per the overlap policy).
const (
	scheduleOverlap       = enumspb.SCHEDULE_OVERLAP_POLICY_BUFFER_ONE
	scheduleCatchupWindow = time.Hour
	// actionTimeout bounds one ScheduledEnqueue workflow (its activity
	// gives up after 15 minutes).
	actionTimeout = 20 * time.Minute
)

// Schedule request limits.
const (
	// MinEvery is the shortest interval a schedule may fire at.
	MinEvery = time.Second
	// maxCronLen bounds a cron expression.
	maxCronLen = 256
	// describeParallelism bounds concurrent Temporal Describe calls per list page.
	describeParallelism = 8
	describeTimeout     = 3 * time.Second
	// recentRefusals is how many refusals GET on one schedule shows.
	recentRefusals = 20
)

// Deps are the Service's collaborators. Store, Starter, Variables and
// Temporal are required, and WebhookKey must be 32 bytes (see WebhookKey).
type Deps struct {
	Store   *store.Store
	Starter *starter.Starter
	// Variables resolves templated schedule input: the registry graph
	// validation and activities use (the app wires one).
	Variables *variables.Registry
	Temporal  client.Client
	// TaskQueue is where ScheduledEnqueue workflows run (the workers' queue).
	TaskQueue  string
	WebhookKey []byte
	Logger     *slog.Logger
	// Now is the clock webhook signatures are checked against; nil is time.Now.
	Now func() time.Time
}

// Service manages schedules and webhooks for the API.
type Service struct {
	*Enqueuer
	temporal  client.Client
	taskQueue string
	box       *secretBox
	now       func() time.Time
}

// New returns a Service.
func New(d Deps) (*Service, error) {
	if d.Temporal == nil || d.TaskQueue == "" {
		return nil, errors.New("bridges: Temporal and TaskQueue are required")
	}
	enq, err := NewEnqueuer(d.Store, d.Starter, d.Variables, d.Logger)
	if err != nil {
		return nil, err
	}
	box, err := newSecretBox(d.WebhookKey)
	if err != nil {
		return nil, err
	}
	if d.Now == nil {
		d.Now = time.Now
	}
	return &Service{Enqueuer: enq, temporal: d.Temporal, taskQueue: d.TaskQueue, box: box, now: d.Now}, nil
}

// ScheduleRequest is what a user asks to schedule. Exactly one of Cron and
// Every is set.
type ScheduleRequest struct {
	Cron  string
	Every string
	Input json.RawMessage
	// Bindings are explicit record bindings of the input's templates
	// (e.g. {"agentId": "triage"} for {{ agent.name }}).
	Bindings map[string]string
	Paused   bool
	// ToolPolicy lists the tools (actionId@version) the schedule's runs'
	// agents may be offered; nil or empty offers none.
	ToolPolicy []string
}

// ScheduleView is a schedule as the API shows it.
type ScheduleView struct {
	ScheduleID  string `json:"scheduleId"`
	WorkflowKey string `json:"workflowKey"`
	Cron        string `json:"cron,omitempty"`
	Every       string `json:"every,omitempty"`
	// Input is the input of every firing as written: with templates, raw
	// (each firing's run receives it resolved).
	Input json.RawMessage `json:"input"`
	// Bindings are the explicit record bindings of the input's templates.
	Bindings map[string]string `json:"bindings"`
	// Templated is set when the input holds {{ }} templates resolved at
	// every firing.
	Templated bool `json:"templated"`
	// Paused is Temporal's live state when it answered, else the state the
	// schedule was created in.
	Paused    bool      `json:"paused"`
	CreatedBy string    `json:"createdBy"`
	CreatedAt time.Time `json:"createdAt"`
	// Actor is who the runs act as.
	Actor ServiceActorView `json:"actor"`
	// ToolPolicy is what the runs' agents may be offered at most.
	ToolPolicyView
	Temporal ScheduleTemporalState `json:"temporal"`
	// LastRefusal is the most recent firing refused instead of run.
	LastRefusal *Refusal `json:"lastRefusal"`
	// Refusals lists recent refusals (GET of one schedule only).
	Refusals []*Refusal `json:"refusals,omitempty"`
}

// ServiceActorView is the service actor a bridge's runs carry.
type ServiceActorView struct {
	Kind         string `json:"kind"`
	Sub          string `json:"sub"`
	ConfiguredBy string `json:"configuredBy"`
}

// ScheduleTemporalState is what Temporal says about the schedule.
type ScheduleTemporalState struct {
	ScheduleID string `json:"scheduleId"`
	// Unavailable is set when Temporal did not answer in time; the other
	// fields are then empty.
	Unavailable     bool        `json:"unavailable,omitempty"`
	NextActionTimes []time.Time `json:"nextActionTimes,omitempty"`
	NumActions      int         `json:"numActions"`
	Note            string      `json:"note,omitempty"`
}

// checkSpec validates and normalises the spec of req.
func checkSpec(req ScheduleRequest) (store.ScheduleSpec, client.ScheduleSpec, error) {
	cron, every := strings.TrimSpace(req.Cron), strings.TrimSpace(req.Every)
	switch {
	case cron == "" && every == "":
		return store.ScheduleSpec{}, client.ScheduleSpec{}, failure.New(failure.CodeInvalidRequest, "a schedule needs cron or every")
	case cron != "" && every != "":
		return store.ScheduleSpec{}, client.ScheduleSpec{}, failure.New(failure.CodeInvalidRequest, "a schedule takes cron or every, not both")
	case cron != "":
		if len(cron) > maxCronLen || strings.ContainsAny(cron, "\n\r\x00") {
			return store.ScheduleSpec{}, client.ScheduleSpec{}, failure.New(failure.CodeInvalidRequest, "cron must be one line of at most %d characters", maxCronLen)
		}
		return store.ScheduleSpec{Cron: cron}, client.ScheduleSpec{CronExpressions: []string{cron}}, nil
	}
	d, err := time.ParseDuration(every)
	if err != nil {
		return store.ScheduleSpec{}, client.ScheduleSpec{}, failure.New(failure.CodeInvalidRequest, "every must be a Go duration such as \"30s\" or \"1h\"")
	}
	if d < MinEvery || d%time.Second != 0 {
		return store.ScheduleSpec{}, client.ScheduleSpec{}, failure.New(failure.CodeInvalidRequest, "every must be a whole number of seconds, at least %s", MinEvery)
	}
	return store.ScheduleSpec{Every: d.String()},
		client.ScheduleSpec{Intervals: []client.ScheduleIntervalSpec{{Every: d}}}, nil
}

// normalizeInput returns input, or JSON null when absent; the starter
// validates it against the input schema at every firing.
func normalizeInput(in json.RawMessage) (json.RawMessage, error) {
	s := strings.TrimSpace(string(in))
	if s == "" {
		return json.RawMessage("null"), nil
	}
	if !json.Valid([]byte(s)) {
		return nil, failure.New(failure.CodeInvalidRequest, "input is not valid JSON")
	}
	if len(s) > starter.MaxInputBytes {
		return nil, failure.New(failure.CodeDocumentTooLarge, "input exceeds %d bytes", starter.MaxInputBytes)
	}
	return json.RawMessage(s), nil
}

// checkCreator refuses a creator who could not run the workflow themselves.
func checkCreator(creator auth.Principal) error {
	if missing := auth.Missing(creator.Scopes, RequiredScopes); len(missing) > 0 {
		return failure.New(failure.CodeMissingScope, "a bridge runs the workflow as you: it needs scope %s", strings.Join(missing, ", ")).
			WithDetails(map[string]any{"missing": missing})
	}
	return nil
}

// CreateSchedule stores a schedule and creates its Temporal Schedule. The
// row is written first so the first firing finds it; if Temporal refuses,
// the row is withdrawn.
func (s *Service) CreateSchedule(ctx context.Context, creator auth.Principal, workflowKey string, req ScheduleRequest) (ScheduleView, error) {
	spec, tspec, err := checkSpec(req)
	if err != nil {
		return ScheduleView{}, err
	}
	input, err := normalizeInput(req.Input)
	if err != nil {
		return ScheduleView{}, err
	}
	if err := checkCreator(creator); err != nil {
		return ScheduleView{}, err
	}
	policy, err := s.creatorPolicy(ctx, creator, req.ToolPolicy)
	if err != nil {
		return ScheduleView{}, err
	}
	scopes, err := s.creatorScopesNow(ctx, creator)
	if err != nil {
		return ScheduleView{}, err
	}
	templated, err := checkInputTemplates(s.vars, scopes, input, req.Bindings)
	if err != nil {
		return ScheduleView{}, err
	}
	id := newID(schedulePrefix)
	row, err := s.store.CreateSchedule(ctx, store.Schedule{
		TenantID: creator.Tenant, ScheduleID: id, WorkflowKey: workflowKey, Spec: spec, Input: input,
		Paused: req.Paused, CreatedBy: creator.Sub, TenantName: creator.TenantName, Scopes: creator.Scopes,
		TemporalScheduleID: TemporalScheduleID(creator.Tenant, id), ToolPolicy: policy,
		InputBindings: req.Bindings, InputTemplated: templated,
	})
	if err != nil {
		return ScheduleView{}, notFoundAs(err, "workflow %q not found", workflowKey)
	}
	_, err = s.temporal.ScheduleClient().Create(ctx, client.ScheduleOptions{
		ID:   row.TemporalScheduleID,
		Spec: tspec,
		Action: &client.ScheduleWorkflowAction{
			ID:                       row.TemporalScheduleID,
			Workflow:                 execution.ScheduledEnqueueWorkflow,
			Args:                     []any{execution.ScheduledEnqueueParams{TenantID: row.TenantID, ScheduleID: row.ScheduleID}},
			TaskQueue:                s.taskQueue,
			WorkflowExecutionTimeout: actionTimeout,
			TypedSearchAttributes: temporal.NewSearchAttributes(
				execution.KeyTenant.ValueSet(row.TenantID),
				execution.KeyWorkflowKey.ValueSet(row.WorkflowKey),
			),
			StaticSummary: fmt.Sprintf("schedule %s → enqueue %s", row.ScheduleID, row.WorkflowKey),
			StaticDetails: fmt.Sprintf("weft schedule %s of workflow %s, configured by %s; runs as service actor schedule:%s",
				row.ScheduleID, row.WorkflowKey, row.CreatedBy, row.ScheduleID),
		},
		Overlap:       scheduleOverlap,
		CatchupWindow: scheduleCatchupWindow,
		Paused:        req.Paused,
		Note:          fmt.Sprintf("weft schedule of %s by %s", row.WorkflowKey, row.CreatedBy),
	})
	if err != nil {
		if _, derr := s.store.DeleteSchedule(context.WithoutCancel(ctx), row.TenantID, row.WorkflowKey, row.ScheduleID); derr != nil {
			s.log.Error("withdraw schedule row after a refused Temporal create", "schedule", row.ScheduleID, "err", derr)
		}
		var invalid *serviceerror.InvalidArgument
		if errors.As(err, &invalid) {
			return ScheduleView{}, failure.New(failure.CodeInvalidRequest, "Temporal refused the schedule: %s", invalid.Message)
		}
		return ScheduleView{}, failure.Wrap(err, failure.CodeUnavailable, "the schedule could not be created in Temporal")
	}
	s.log.Info("schedule created", "schedule", row.ScheduleID, "tenant", row.TenantID, "workflowKey", row.WorkflowKey, "by", row.CreatedBy)
	v := scheduleView(row)
	s.describe(ctx, &v)
	return v, nil
}

func scheduleView(r store.Schedule) ScheduleView {
	return ScheduleView{
		ScheduleID: r.ScheduleID, WorkflowKey: r.WorkflowKey, Cron: r.Spec.Cron, Every: r.Spec.Every,
		Input: r.Input, Bindings: r.InputBindings, Templated: r.InputTemplated,
		Paused: r.Paused, CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt,
		Actor:          ServiceActorView{Kind: "service", Sub: store.BridgeSchedule + ":" + r.ScheduleID, ConfiguredBy: r.CreatedBy},
		ToolPolicyView: scheduleToolPolicy(r),
		Temporal:       ScheduleTemporalState{ScheduleID: r.TemporalScheduleID},
	}
}

// describe fills v's Temporal state (next action times, live paused state)
// from one Describe call; a slow or failing Temporal only marks it unavailable.
func (s *Service) describe(ctx context.Context, v *ScheduleView) {
	ctx, cancel := context.WithTimeout(ctx, describeTimeout)
	defer cancel()
	d, err := s.temporal.ScheduleClient().GetHandle(ctx, v.Temporal.ScheduleID).Describe(ctx)
	if err != nil {
		s.log.Warn("describe schedule", "schedule", v.ScheduleID, "err", err)
		v.Temporal.Unavailable = true
		return
	}
	v.Temporal.NextActionTimes = d.Info.NextActionTimes
	if len(v.Temporal.NextActionTimes) > 3 {
		v.Temporal.NextActionTimes = v.Temporal.NextActionTimes[:3]
	}
	v.Temporal.NumActions = d.Info.NumActions
	if st := d.Schedule.State; st != nil {
		v.Paused = st.Paused
		v.Temporal.Note = st.Note
	}
}

// ListSchedules lists a workflow's live schedules after the cursor, each
// with Temporal's state and its last refusal. A workflow the tenant does
// not have is NOT_FOUND.
func (s *Service) ListSchedules(ctx context.Context, tenantID, workflowKey string, after *store.BridgeCursor, limit int) ([]ScheduleView, error) {
	if _, err := s.store.GetWorkflow(ctx, tenantID, workflowKey); err != nil {
		return nil, notFoundAs(err, "workflow %q not found", workflowKey)
	}
	rows, err := s.store.ListSchedules(ctx, tenantID, workflowKey, after, limit)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(rows))
	views := make([]ScheduleView, len(rows))
	for i, r := range rows {
		ids[i] = r.ScheduleID
		views[i] = scheduleView(r)
	}
	last, err := s.store.LatestRefusals(ctx, tenantID, store.BridgeSchedule, ids)
	if err != nil {
		return nil, err
	}
	sem := make(chan struct{}, describeParallelism)
	var wg sync.WaitGroup
	for i := range views {
		if r, ok := last[views[i].ScheduleID]; ok {
			views[i].LastRefusal = refusalView(r)
		}
		wg.Add(1)
		sem <- struct{}{}
		go func(v *ScheduleView) {
			defer func() { <-sem; wg.Done() }()
			s.describe(ctx, v)
		}(&views[i])
	}
	wg.Wait()
	return views, nil
}

// GetSchedule returns one live schedule with its recent refusals.
func (s *Service) GetSchedule(ctx context.Context, tenantID, workflowKey, scheduleID string) (ScheduleView, error) {
	row, err := s.liveSchedule(ctx, tenantID, workflowKey, scheduleID)
	if err != nil {
		return ScheduleView{}, err
	}
	v := scheduleView(row)
	refusals, err := s.store.ListRefusals(ctx, tenantID, store.BridgeSchedule, scheduleID, recentRefusals)
	if err != nil {
		return ScheduleView{}, err
	}
	v.Refusals = make([]*Refusal, 0, len(refusals))
	for _, r := range refusals {
		v.Refusals = append(v.Refusals, refusalView(r))
	}
	if len(v.Refusals) > 0 {
		v.LastRefusal = v.Refusals[0]
	}
	s.describe(ctx, &v)
	return v, nil
}

func (s *Service) liveSchedule(ctx context.Context, tenantID, workflowKey, scheduleID string) (store.Schedule, error) {
	missing := failure.New(failure.CodeNotFound, "schedule %q not found", scheduleID)
	if !validScheduleID(scheduleID) {
		return store.Schedule{}, missing
	}
	row, err := s.store.GetSchedule(ctx, tenantID, scheduleID)
	if errors.Is(err, failure.ErrNotFound) || (err == nil && (row.WorkflowKey != workflowKey || row.DeletedAt != nil)) {
		return store.Schedule{}, missing
	}
	return row, err
}

func validScheduleID(id string) bool { return scheduleIDPattern.MatchString(id) }

// SetScheduleToolPolicy replaces a live schedule's tool policy (narrowing it
// takes effect at the next tool call of its runs under way; see
// replacementPolicy for widening) and returns the schedule.
func (s *Service) SetScheduleToolPolicy(ctx context.Context, caller auth.Principal, workflowKey, scheduleID string, policy []string) (ScheduleView, error) {
	row, err := s.liveSchedule(ctx, caller.Tenant, workflowKey, scheduleID)
	if err != nil {
		return ScheduleView{}, err
	}
	next, err := s.replacementPolicy(ctx, caller, row.CreatedBy, row.Scopes, row.ToolPolicy, policy)
	if err != nil {
		return ScheduleView{}, err
	}
	row, err = s.store.SetScheduleToolPolicy(ctx, caller.Tenant, workflowKey, scheduleID, next, caller.Sub)
	if err != nil {
		return ScheduleView{}, notFoundAs(err, "schedule %q not found", scheduleID)
	}
	s.log.Info("schedule tool policy set", "schedule", scheduleID, "tenant", caller.Tenant, "workflowKey", workflowKey,
		"by", caller.Sub, "toolPolicy", next)
	v := scheduleView(row)
	s.describe(ctx, &v)
	return v, nil
}

// DeleteSchedule withdraws a schedule: the row is marked deleted first (a
// firing already under way then does nothing), then the Temporal Schedule
// is deleted. If Temporal fails, the answer is UNAVAILABLE and a repeated
// DELETE finishes the job; meanwhile firings find the row deleted.
func (s *Service) DeleteSchedule(ctx context.Context, tenantID, workflowKey, scheduleID string) error {
	missing := failure.New(failure.CodeNotFound, "schedule %q not found", scheduleID)
	if !validScheduleID(scheduleID) {
		return missing
	}
	row, err := s.store.GetSchedule(ctx, tenantID, scheduleID)
	if errors.Is(err, failure.ErrNotFound) || (err == nil && row.WorkflowKey != workflowKey) {
		return missing
	}
	if err != nil {
		return err
	}
	wasLive := row.DeletedAt == nil
	if wasLive {
		if _, err := s.store.DeleteSchedule(ctx, tenantID, workflowKey, scheduleID); err != nil && !errors.Is(err, failure.ErrNotFound) {
			return err
		}
	}
	err = s.temporal.ScheduleClient().GetHandle(ctx, row.TemporalScheduleID).Delete(ctx)
	var nf *serviceerror.NotFound
	switch {
	case errors.As(err, &nf):
		if !wasLive {
			return missing // deleted before, and nothing was left in Temporal
		}
	case err != nil:
		return failure.Wrap(err, failure.CodeUnavailable, "schedule %s is withdrawn but its Temporal Schedule could not be deleted; repeat the DELETE", scheduleID)
	}
	s.log.Info("schedule deleted", "schedule", scheduleID, "tenant", tenantID, "workflowKey", workflowKey)
	return nil
}

// FireResult is what one firing did.
type FireResult struct {
	RunID   string
	Created bool
	// Refusal is set when the firing was refused (and recorded) instead of run.
	Refusal *Refusal
	// Skipped says why nothing was done.
	Skipped string
}

// FiringKey is the idempotency key of the run a firing starts:
// "<schedule id>@<scheduled time, RFC 3339 UTC>".
func FiringKey(scheduleID string, scheduledAt time.Time) string {
	return scheduleID + "@" + scheduledAt.UTC().Format(time.RFC3339)
}

// firingInput is the input one firing of a templated schedule's run
// receives: the one stored with the firing when an earlier execution of
// it resolved it already, else its templates resolved now as the service
// actor and stored before the enqueue.
func (e *Enqueuer) firingInput(ctx context.Context, a serviceActor, row store.Schedule, key string, scheduledAt time.Time, perms []string) (json.RawMessage, error) {
	stored, found, err := e.store.ScheduleFiringInput(ctx, row.TenantID, row.ScheduleID, key)
	if err != nil || found {
		return stored, err
	}
	resolved, err := resolveInput(ctx, e.vars, a, scheduledAt, perms, row.Input, row.InputBindings)
	if err != nil {
		return nil, err
	}
	if len(resolved) > starter.MaxInputBytes {
		return nil, failure.New(failure.CodeDocumentTooLarge, "the resolved input exceeds %d bytes", starter.MaxInputBytes)
	}
	return e.store.SaveScheduleFiringInput(ctx, row.TenantID, row.ScheduleID, key, resolved)
}

// FireSchedule enqueues one firing of a schedule as its service actor. A
// deleted schedule is skipped; a refusal is recorded and returned in the
// result (not as an error: retrying cannot change it); any other error is
// worth retrying.
func (e *Enqueuer) FireSchedule(ctx context.Context, tenantID, scheduleID string, scheduledAt time.Time) (FireResult, error) {
	row, err := e.store.GetSchedule(ctx, tenantID, scheduleID)
	if errors.Is(err, failure.ErrNotFound) {
		e.log.Warn("schedule firing skipped: no such schedule", "schedule", scheduleID, "tenant", tenantID)
		return FireResult{Skipped: "schedule not found"}, nil
	}
	if err != nil {
		return FireResult{}, err
	}
	if row.DeletedAt != nil {
		e.log.Info("schedule firing skipped: the schedule was deleted", "schedule", scheduleID, "tenant", tenantID)
		return FireResult{Skipped: "schedule deleted"}, nil
	}
	key := FiringKey(scheduleID, scheduledAt)
	a := serviceActor{
		kind: store.BridgeSchedule, id: row.ScheduleID, tenantID: row.TenantID, tenantName: row.TenantName,
		workflowKey: row.WorkflowKey, createdBy: row.CreatedBy, scopes: row.Scopes, toolPolicy: row.ToolPolicy,
	}
	if row.InputTemplated {
		a.resolve = func(ctx context.Context, perms []string) (json.RawMessage, error) {
			return e.firingInput(ctx, a, row, key, scheduledAt, perms)
		}
	}
	acc, err := e.enqueue(ctx, a, row.Input, key)
	var refused *refusedError
	if errors.As(err, &refused) {
		r := &Refusal{At: time.Now().UTC(), FiringKey: key, Code: refused.fe.Code, Message: refused.fe.Message}
		if m, ok := refused.fe.Details["missing"].([]string); ok {
			r.Missing = m
		}
		return FireResult{Refusal: r}, nil
	}
	if err != nil {
		return FireResult{}, err
	}
	return FireResult{RunID: acc.RunID, Created: acc.Created}, nil
}
