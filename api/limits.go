package api

import (
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/store"
)

// maxLimitsBody bounds a PUT of limits.
const maxLimitsBody = 4 << 10

// registerLimitsRoutes adds the limits routes (issue 19): caps on running
// work per tenant and per workflow, and workflows' default budgets. Reading
// them needs workflows.read (they are shown on the workflow too); setting
// them needs limits.manage. The tenant is always the token's.
func (s *Server) registerLimitsRoutes(g *echo.Group) {
	read := requireScope(auth.ScopeWorkflowsRead)
	manage := requireScope(auth.ScopeLimitsManage)
	g.GET("/limits", s.getLimits, read)
	g.PUT("/limits", s.putTenantLimits, manage)
	g.GET("/workflows/:key/limits", s.getWorkflowLimits, read)
	g.PUT("/workflows/:key/limits", s.putWorkflowLimits, manage)
}

// budgetBody is a budget as the API shows it: null fields bound nothing.
type budgetBody struct {
	MaxCostUSD *float64 `json:"maxCostUsd"`
	MaxTokens  *int64   `json:"maxTokens"`
}

func toBudgetBody(b store.Budget) budgetBody {
	return budgetBody{MaxCostUSD: b.MaxCostUSD, MaxTokens: b.MaxTokens}
}

// workflowLimitsBody is one workflow's limits and what its runs hold of them.
type workflowLimitsBody struct {
	WorkflowKey        string `json:"workflowKey"`
	MaxConcurrentRuns  *int   `json:"maxConcurrentRuns"`
	MaxStartsPerMinute *int   `json:"maxStartsPerMinute"`
	// Budget is the default budget of the workflow's runs.
	Budget budgetBody `json:"budget"`
	// Running counts its live runs holding a slot (queued or running),
	// Throttled those waiting for one, StartsLastMinute those admitted in
	// the last minute.
	Running          int        `json:"running"`
	Throttled        int        `json:"throttled"`
	StartsLastMinute int        `json:"startsLastMinute"`
	UpdatedBy        *string    `json:"updatedBy"`
	UpdatedAt        *time.Time `json:"updatedAt"`
}

func toWorkflowLimitsBody(l store.WorkflowLimits, u store.WorkflowUsage) workflowLimitsBody {
	out := workflowLimitsBody{WorkflowKey: l.WorkflowKey, MaxConcurrentRuns: l.MaxConcurrentRuns,
		MaxStartsPerMinute: l.MaxStartsPerMinute, Budget: toBudgetBody(l.Budget),
		Running: u.Running, Throttled: u.Throttled, StartsLastMinute: u.StartsInWindow}
	if !l.UpdatedAt.IsZero() {
		out.UpdatedBy, out.UpdatedAt = &l.UpdatedBy, &l.UpdatedAt
	}
	return out
}

// tenantLimitsBody is the tenant's cap and what its runs hold of it.
type tenantLimitsBody struct {
	MaxConcurrentRuns *int       `json:"maxConcurrentRuns"`
	Running           int        `json:"running"`
	Throttled         int        `json:"throttled"`
	UpdatedBy         *string    `json:"updatedBy"`
	UpdatedAt         *time.Time `json:"updatedAt"`
}

func toTenantLimitsBody(l store.TenantLimits, u store.LimitsUsage) tenantLimitsBody {
	out := tenantLimitsBody{MaxConcurrentRuns: l.MaxConcurrentRuns, Running: u.Running, Throttled: u.Throttled}
	if !l.UpdatedAt.IsZero() {
		out.UpdatedBy, out.UpdatedAt = &l.UpdatedBy, &l.UpdatedAt
	}
	return out
}

// limitsBody answers GET /v1/limits.
type limitsBody struct {
	Tenant tenantLimitsBody `json:"tenant"`
	// Workflows lists, in key order, the workflows with limits set or with
	// live runs holding or waiting for a slot.
	Workflows []workflowLimitsBody `json:"workflows"`
}

// getLimits handles GET /v1/limits.
func (s *Server) getLimits(c echo.Context) error {
	ctx := c.Request().Context()
	tenant := principal(c).Tenant
	tl, err := s.deps.Store.GetTenantLimits(ctx, tenant)
	if err != nil {
		return err
	}
	wls, err := s.deps.Store.ListWorkflowLimits(ctx, tenant)
	if err != nil {
		return err
	}
	keys := make([]string, 0, len(wls))
	for _, l := range wls {
		keys = append(keys, l.WorkflowKey)
	}
	usage, err := s.deps.Store.LimitsUsage(ctx, tenant, keys)
	if err != nil {
		return err
	}
	byKey := map[string]store.WorkflowLimits{}
	for _, l := range wls {
		byKey[l.WorkflowKey] = l
	}
	for k := range usage.Workflows {
		if _, ok := byKey[k]; !ok {
			byKey[k] = store.WorkflowLimits{TenantID: tenant, WorkflowKey: k}
		}
	}
	keys = slices.Sorted(maps.Keys(byKey))
	out := limitsBody{Tenant: toTenantLimitsBody(tl, usage), Workflows: make([]workflowLimitsBody, 0, len(keys))}
	for _, k := range keys {
		out.Workflows = append(out.Workflows, toWorkflowLimitsBody(byKey[k], usage.Workflows[k]))
	}
	return c.JSON(http.StatusOK, out)
}

// putTenantLimitsRequest is the body of PUT /v1/limits: every field, a
// null or absent one removing that limit.
type putTenantLimitsRequest struct {
	MaxConcurrentRuns *int `json:"maxConcurrentRuns"`
}

// putTenantLimits handles PUT /v1/limits: 200 with the tenant's limits.
// Runs waiting that the new cap makes room for start at once.
func (s *Server) putTenantLimits(c echo.Context) error {
	if s.deps.Starter == nil {
		return errNoStarter
	}
	var body putTenantLimitsRequest
	if err := decodeBody(c, maxLimitsBody, &body); err != nil {
		return err
	}
	p := principal(c)
	ctx := c.Request().Context()
	l, err := s.deps.Starter.SetTenantLimits(ctx, store.TenantLimits{TenantID: p.Tenant, MaxConcurrentRuns: body.MaxConcurrentRuns,
		UpdatedBy: p.Sub})
	if err != nil {
		return err
	}
	usage, err := s.deps.Store.LimitsUsage(ctx, p.Tenant, nil)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toTenantLimitsBody(l, usage))
}

// workflowLimits reads workflow key's limits and usage (404 for a
// workflow the tenant does not have).
func (s *Server) workflowLimits(c echo.Context, tenant, key string) (workflowLimitsBody, error) {
	ctx := c.Request().Context()
	l, err := s.deps.Store.GetWorkflowLimits(ctx, tenant, key)
	if err != nil {
		return workflowLimitsBody{}, notFoundAs(err, "workflow %q not found", key)
	}
	usage, err := s.deps.Store.LimitsUsage(ctx, tenant, []string{key})
	if err != nil {
		return workflowLimitsBody{}, err
	}
	return toWorkflowLimitsBody(l, usage.Workflows[key]), nil
}

// getWorkflowLimits handles GET /v1/workflows/{key}/limits.
func (s *Server) getWorkflowLimits(c echo.Context) error {
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	out, err := s.workflowLimits(c, principal(c).Tenant, key)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}

// putWorkflowLimitsRequest is the body of PUT /v1/workflows/{key}/limits:
// every field, a null or absent one removing that limit.
type putWorkflowLimitsRequest struct {
	MaxConcurrentRuns  *int          `json:"maxConcurrentRuns"`
	MaxStartsPerMinute *int          `json:"maxStartsPerMinute"`
	Budget             *store.Budget `json:"budget"`
}

// putWorkflowLimits handles PUT /v1/workflows/{key}/limits: 200 with the
// workflow's limits. Runs waiting that the new limits make room for start
// at once; a cap lowered below what runs hold never stops them.
func (s *Server) putWorkflowLimits(c echo.Context) error {
	if s.deps.Starter == nil {
		return errNoStarter
	}
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	var body putWorkflowLimitsRequest
	if err := decodeBody(c, maxLimitsBody, &body); err != nil {
		return err
	}
	p := principal(c)
	l := store.WorkflowLimits{TenantID: p.Tenant, WorkflowKey: key, MaxConcurrentRuns: body.MaxConcurrentRuns,
		MaxStartsPerMinute: body.MaxStartsPerMinute, UpdatedBy: p.Sub}
	if body.Budget != nil {
		l.Budget = *body.Budget
	}
	if _, err := s.deps.Starter.SetWorkflowLimits(c.Request().Context(), l); err != nil {
		return notFoundAs(err, "workflow %q not found", key)
	}
	out, err := s.workflowLimits(c, p.Tenant, key)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, out)
}
