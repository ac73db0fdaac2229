package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/bridges"
	"github.com/weftworks/weft/failure"
)

// registerWebhookRoutes adds the webhook management routes under /v1 and
// the delivery route POST /hooks/{id}, which is outside /v1: it takes no
// bearer token, the Weft-Signature header authenticates it.
func (s *Server) registerWebhookRoutes(e *echo.Echo, g *echo.Group) {
	b := s.newBridgeRoutes()
	manage := requireScope(auth.ScopeSchedulesManage)
	g.POST("/workflows/:key/webhooks", b.createWebhook, manage)
	g.GET("/workflows/:key/webhooks", b.listWebhooks, manage)
	g.DELETE("/workflows/:key/webhooks/:id", b.deleteWebhook, manage)
	e.POST("/hooks/:id", b.deliverWebhook)
}

// createWebhook answers 201 {webhookId, secret, url, ...}; the secret is
// shown this once. The body is empty or {}.
func (b *bridgeRoutes) createWebhook(c echo.Context) error {
	svc, err := b.service()
	if err != nil {
		return err
	}
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	data, err := io.ReadAll(http.MaxBytesReader(c.Response(), c.Request().Body, maxWebhookCreateBodySize))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return failure.New(failure.CodeDocumentTooLarge, "the request body exceeds %d bytes", maxWebhookCreateBodySize)
	}
	if err != nil {
		return failure.Wrap(err, failure.CodeInvalidRequest, "the request body could not be read")
	}
	if len(bytes.TrimSpace(data)) > 0 {
		var none struct{}
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&none); err != nil {
			return failure.New(failure.CodeInvalidRequest, "a webhook takes no options: send no body or {}")
		}
	}
	created, err := svc.CreateWebhook(c.Request().Context(), principal(c), key)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, created)
}

// listWebhooks lists the workflow's webhooks (never their secrets), each
// with its last refused delivery.
func (b *bridgeRoutes) listWebhooks(c echo.Context) error {
	svc, err := b.service()
	if err != nil {
		return err
	}
	key, err := workflowPathKey(c)
	if err != nil {
		return err
	}
	p := principal(c)
	scope := cursorScope("webhooks", p.Tenant, key)
	limit, after, err := b.bridgePage(c, scope)
	if err != nil {
		return err
	}
	items, err := svc.ListWebhooks(c.Request().Context(), p.Tenant, key, after, limit+1)
	if err != nil {
		return err
	}
	next := ""
	if len(items) > limit {
		items = items[:limit]
		last := items[limit-1]
		next = b.nextCursor(scope, last.CreatedAt, last.WebhookID)
	}
	return list(c, "webhooks", items, next)
}

func (b *bridgeRoutes) deleteWebhook(c echo.Context) error {
	svc, err := b.service()
	if err != nil {
		return err
	}
	key, err := workflowPathKey(c)
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
	body, err := io.ReadAll(http.MaxBytesReader(c.Response(), req.Body, bridges.MaxWebhookBody))
	var tooBig *http.MaxBytesError
	if errors.As(err, &tooBig) {
		return failure.New(failure.CodeDocumentTooLarge, "the request body exceeds %d bytes", bridges.MaxWebhookBody)
	}
	if err != nil {
		return failure.Wrap(err, failure.CodeInvalidRequest, "the request body could not be read")
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
