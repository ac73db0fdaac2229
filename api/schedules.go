package api

import (
	"context"
	"encoding/json"
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
)

// Bridge route limits.
const (
	// maxScheduleBody bounds a schedule creation: the input and the spec.
	maxScheduleBody          = starter.MaxInputBytes + 64<<10
	defaultBridgesLimit      = 50
	maxBridgesLimit          = store.MaxBridgePageSize
	maxWebhookCreateBodySize = 4 << 10
)

// bridgeRoutes serves the schedule and webhook routes (SPEC §8) over one
// bridges.Service, Deps.Bridges. When the server is wired without one,
// every bridge route answers 503.
type bridgeRoutes struct {
	s   *Server
	svc *bridges.Service
}

func (s *Server) newBridgeRoutes() *bridgeRoutes {
	return &bridgeRoutes{s: s, svc: s.deps.Bridges}
}

var errNoBridges = failure.New(failure.CodeUnavailable, "schedules and webhooks are not available on this server")

func (b *bridgeRoutes) service() (*bridges.Service, error) {
	if b.svc == nil {
		return nil, errNoBridges
	}
	return b.svc, nil
}

// workflowService returns the bridge service and the validated {key} path
// parameter of a /v1/workflows/{key}/... bridge route.
func (b *bridgeRoutes) workflowService(c echo.Context) (*bridges.Service, string, error) {
	svc, err := b.service()
	if err != nil {
		return nil, "", err
	}
	key, err := workflowPathKey(c)
	if err != nil {
		return nil, "", err
	}
	return svc, key, nil
}

// registerScheduleRoutes adds /v1/workflows/{key}/schedules. SPEC §10
// lists POST/GET/DELETE on the collection; a schedule is deleted with its id
// in the path (DELETE .../schedules/{id}) or, equivalently, in the query
// (DELETE .../schedules?scheduleId={id}).
func (s *Server) registerScheduleRoutes(g *echo.Group) {
	b := s.newBridgeRoutes()
	manage := requireScope(auth.ScopeSchedulesManage)
	g.POST("/workflows/:key/schedules", b.createSchedule, manage)
	g.GET("/workflows/:key/schedules", b.listSchedules, manage)
	g.GET("/workflows/:key/schedules/:id", b.getSchedule, manage)
	g.DELETE("/workflows/:key/schedules/:id", b.deleteSchedule, manage)
	g.DELETE("/workflows/:key/schedules", b.deleteSchedule, manage)
	g.PUT("/workflows/:key/schedules/:id/tool-policy", b.setScheduleToolPolicy, manage)
}

// createScheduleBody is the body of POST /v1/workflows/{key}/schedules.
type createScheduleBody struct {
	Cron  string          `json:"cron"`
	Every string          `json:"every"`
	Input json.RawMessage `json:"input"`
	// Bindings are the explicit record bindings of the input's {{ }}
	// templates (e.g. {"agentId": "triage"}).
	Bindings map[string]string `json:"bindings"`
	Paused   bool              `json:"paused"`
	// ToolPolicy lists the tools (actionId@version) the runs' agents may be
	// offered; absent or empty offers none.
	ToolPolicy []string `json:"toolPolicy"`
}

func (b *bridgeRoutes) createSchedule(c echo.Context) error {
	svc, key, err := b.workflowService(c)
	if err != nil {
		return err
	}
	var body createScheduleBody
	if err := decodeStrict(c, maxScheduleBody, &body); err != nil {
		return err
	}
	v, err := svc.CreateSchedule(c.Request().Context(), principal(c), key, bridges.ScheduleRequest{
		Cron: body.Cron, Every: body.Every, Input: body.Input, Bindings: body.Bindings, Paused: body.Paused,
		ToolPolicy: body.ToolPolicy,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, v)
}

// bridgeCursor is the position a schedules or webhooks page ends at.
type bridgeCursor struct {
	CreatedAt time.Time `json:"c"`
	ID        string    `json:"i"`
}

// bridgePage reads limit and cursor for a bridge listing bound to
// (kind, tenant, workflow key).
func (b *bridgeRoutes) bridgePage(c echo.Context, scope string) (int, *store.BridgeCursor, error) {
	limit, err := pageLimit(c, defaultBridgesLimit, maxBridgesLimit)
	if err != nil {
		return 0, nil, err
	}
	bc, err := openJSONCursor(b.s, scope, c.QueryParam("cursor"), func(bc bridgeCursor) bool { return bc.ID != "" })
	if err != nil || bc == nil {
		return limit, nil, err
	}
	return limit, &store.BridgeCursor{CreatedAt: bc.CreatedAt, ID: bc.ID}, nil
}

func (b *bridgeRoutes) nextCursor(scope string, createdAt time.Time, id string) string {
	payload, _ := json.Marshal(bridgeCursor{CreatedAt: createdAt, ID: id})
	return b.s.sealCursor(scope, payload)
}

// listSchedules lists the workflow's schedules, oldest first, each with
// Temporal's next action times and its last refused firing (lastRefusal).
func (b *bridgeRoutes) listSchedules(c echo.Context) error {
	svc, key, err := b.workflowService(c)
	if err != nil {
		return err
	}
	return listBridgePage(b, c, "schedules", key, svc.ListSchedules,
		func(v bridges.ScheduleView) (time.Time, string) { return v.CreatedAt, v.ScheduleID })
}

// listBridgePage answers one page of a workflow's schedules or webhooks
// (plural): fetch lists them after a position, position gives an item's.
func listBridgePage[T any](b *bridgeRoutes, c echo.Context, plural, key string,
	fetch func(ctx context.Context, tenantID, workflowKey string, after *store.BridgeCursor, limit int) ([]T, error),
	position func(T) (time.Time, string),
) error {
	p := principal(c)
	scope := cursorScope(plural, p.Tenant, key)
	limit, after, err := b.bridgePage(c, scope)
	if err != nil {
		return err
	}
	items, err := fetch(c.Request().Context(), p.Tenant, key, after, limit+1)
	if err != nil {
		return err
	}
	next := ""
	if len(items) > limit {
		items = items[:limit]
		createdAt, id := position(items[limit-1])
		next = b.nextCursor(scope, createdAt, id)
	}
	return list(c, plural, items, next)
}

// getSchedule returns one schedule with its recent refusals.
func (b *bridgeRoutes) getSchedule(c echo.Context) error {
	svc, key, err := b.workflowService(c)
	if err != nil {
		return err
	}
	v, err := svc.GetSchedule(c.Request().Context(), principal(c).Tenant, key, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// deleteSchedule withdraws a schedule: 204, or 404 for a missing, deleted
// or foreign one.
func (b *bridgeRoutes) deleteSchedule(c echo.Context) error {
	svc, key, err := b.workflowService(c)
	if err != nil {
		return err
	}
	id := c.Param("id")
	if id == "" {
		if id = c.QueryParam("scheduleId"); id == "" {
			return failure.New(failure.CodeInvalidRequest, "name the schedule: DELETE .../schedules/{id} or ?scheduleId={id}")
		}
	}
	if err := svc.DeleteSchedule(c.Request().Context(), principal(c).Tenant, key, id); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// maxToolPolicyBody bounds PUT .../tool-policy: at most authz.MaxTools
// entries of an actionId@version each.
const maxToolPolicyBody = 64 << 10

// toolPolicyBody is the body of PUT .../{schedules|webhooks}/{id}/tool-policy.
type toolPolicyBody struct {
	// ToolPolicy is required: [] withdraws every tool.
	ToolPolicy *[]string `json:"toolPolicy"`
}

// decodeToolPolicy reads a tool-policy replacement body.
func decodeToolPolicy(c echo.Context) ([]string, error) {
	var body toolPolicyBody
	if err := decodeStrict(c, maxToolPolicyBody, &body); err != nil {
		return nil, err
	}
	if body.ToolPolicy == nil {
		return nil, failure.New(failure.CodeInvalidRequest, "toolPolicy is required: the list of actionId@version the runs' agents may be offered ([] offers none)").
			WithDetails(map[string]any{"field": "toolPolicy"})
	}
	return *body.ToolPolicy, nil
}

// setScheduleToolPolicy replaces a schedule's tool policy: 200 with the
// schedule. Narrowing reaches its runs under way at their next tool call.
func (b *bridgeRoutes) setScheduleToolPolicy(c echo.Context) error {
	svc, key, err := b.workflowService(c)
	if err != nil {
		return err
	}
	policy, err := decodeToolPolicy(c)
	if err != nil {
		return err
	}
	v, err := svc.SetScheduleToolPolicy(c.Request().Context(), principal(c), key, c.Param("id"), policy)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}
