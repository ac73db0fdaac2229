package api

import (
	"net/http"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
)

// registerWebhookRoutes adds the webhook management routes under /v1 and
// the delivery route POST /hooks/{id}, which is outside /v1: it takes no
// bearer token, the Weft-Signature header authenticates it.
func (s *Server) registerWebhookRoutes(e *echo.Echo, g *echo.Group) {
	b := s.newBridgeRoutes()
	manage := requireScope(auth.ScopeSchedulesManage)
	g.POST("/workflows/:key/webhooks", b.createWebhook, manage)
	g.GET("/workflows/:key/webhooks", b.listWebhooks, manage)
	g.GET("/workflows/:key/webhooks/:id", b.getWebhook, manage)
	g.DELETE("/workflows/:key/webhooks/:id", b.deleteWebhook, manage)
	g.PUT("/workflows/:key/webhooks/:id/tool-policy", b.setWebhookToolPolicy, manage)
	e.POST("/hooks/:id", b.deliverWebhook)
}

// createWebhookBody is the optional body of POST .../webhooks.
type createWebhookBody struct {
	// ToolPolicy lists the tools (actionId@version) the runs' agents may be
	// offered; absent or empty offers none.
	ToolPolicy []string `json:"toolPolicy"`
}

// createWebhook answers 201 {webhookId, secret, url, ...}; the secret is
// shown this once. The body is empty, {} or {"toolPolicy": [...]}.
func (b *bridgeRoutes) createWebhook(c echo.Context) error {
	svc, key, err := b.workflowService(c)
	if err != nil {
		return err
	}
	var body createWebhookBody
	if err := decodeOptionalBody(c, maxWebhookCreateBodySize, &body); err != nil {
		return err
	}
	created, err := svc.CreateWebhook(c.Request().Context(), principal(c), key, body.ToolPolicy)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, created)
}

// listWebhooks lists the workflow's webhooks (never their secrets), each
// with its last refused delivery.
func (b *bridgeRoutes) listWebhooks(c echo.Context) error {
	svc, key, err := b.workflowService(c)
	if err != nil {
		return err
	}
	return listBridgePage(b, c, "webhooks", key, svc.ListWebhooks,
		func(v bridges.WebhookView) (time.Time, string) { return v.CreatedAt, v.WebhookID })
}

// getWebhook returns one webhook (never its secret) with its recent refusals.
func (b *bridgeRoutes) getWebhook(c echo.Context) error {
	svc, key, err := b.workflowService(c)
	if err != nil {
		return err
	}
	v, err := svc.GetWebhook(c.Request().Context(), principal(c).Tenant, key, c.Param("id"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

// setWebhookToolPolicy replaces a webhook's tool policy: 200 with the webhook.
func (b *bridgeRoutes) setWebhookToolPolicy(c echo.Context) error {
	svc, key, err := b.workflowService(c)
	if err != nil {
		return err
	}
	policy, err := decodeToolPolicy(c)
	if err != nil {
		return err
	}
	v, err := svc.SetWebhookToolPolicy(c.Request().Context(), principal(c), key, c.Param("id"), policy)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, v)
}

func (b *bridgeRoutes) deleteWebhook(c echo.Context) error {
	svc, key, err := b.workflowService(c)
	if err != nil {
		return err
	}
	if err := svc.DeleteWebhook(c.Request().Context(), principal(c).Tenant, key, c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

// webhookAccepted answers a delivery.
type webhookAccepted struct {
	RunID  string `json:"runId"`
	Status string `json:"status"`
}

// deliverWebhook is POST /hooks/{id}: body at most 256 KiB (413), the
// signature checked (401 SIGNATURE_MISSING / SIGNATURE_INVALID /
// SIGNATURE_STALE), Weft-Event-Id required (400), the body is the run
// input (400 when not JSON). 202 {runId, status} for a new run; 200 with
// the same run for a replayed event id. An unknown or deleted webhook is
// 404 whatever else the request holds.
func (b *bridgeRoutes) deliverWebhook(c echo.Context) error {
	svc, err := b.service()
	if err != nil {
		return err
	}
	req := c.Request()
	body, err := readBody(c, bridges.MaxWebhookBody)
	if err != nil {
		return err
	}
	acc, err := svc.Deliver(req.Context(), bridges.Delivery{
		WebhookID: c.Param("id"),
		Signature: req.Header.Get(bridges.SignatureHeader),
		EventID:   req.Header.Get(bridges.EventIDHeader),
		Body:      body,
	})
	if err != nil {
		return err
	}
	status := http.StatusAccepted
	if !acc.Created {
		status = http.StatusOK
	}
	return c.JSON(status, webhookAccepted{RunID: acc.RunID, Status: acc.Status})
}
