package bridges

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
	"unicode/utf8"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/starter"
	"github.com/weftworks/weft/store"
)

// Webhook limits.
const (
	// MaxWebhookBody bounds a delivery's body (the run input).
	MaxWebhookBody = 256 << 10
	// MaxEventIDLen bounds Weft-Event-Id, in characters.
	MaxEventIDLen = 200
)

// CreatedWebhook answers a webhook creation. Secret is shown this once.
type CreatedWebhook struct {
	WebhookID   string           `json:"webhookId"`
	WorkflowKey string           `json:"workflowKey"`
	Secret      string           `json:"secret"`
	URL         string           `json:"url"`
	Actor       ServiceActorView `json:"actor"`
	ToolPolicyView
	CreatedAt time.Time `json:"createdAt"`
}

// WebhookView is a webhook as listed: never its secret.
type WebhookView struct {
	WebhookID   string           `json:"webhookId"`
	WorkflowKey string           `json:"workflowKey"`
	URL         string           `json:"url"`
	CreatedBy   string           `json:"createdBy"`
	CreatedAt   time.Time        `json:"createdAt"`
	Actor       ServiceActorView `json:"actor"`
	ToolPolicyView
	LastRefusal *Refusal `json:"lastRefusal"`
	// Refusals lists recent refusals (GET of one webhook only).
	Refusals []*Refusal `json:"refusals,omitempty"`
}

// WebhookPath is the path a webhook is delivered to.
func WebhookPath(webhookID string) string { return "/hooks/" + webhookID }

// CreateWebhook creates a webhook for workflowKey and returns its secret,
// which is stored only encrypted and never shown again. toolPolicy lists
// the tools its runs' agents may be offered (nil or empty: none).
func (s *Service) CreateWebhook(ctx context.Context, creator auth.Principal, workflowKey string, toolPolicy []string) (CreatedWebhook, error) {
	if err := checkCreator(creator); err != nil {
		return CreatedWebhook{}, err
	}
	policy, err := s.creatorPolicy(ctx, creator, toolPolicy)
	if err != nil {
		return CreatedWebhook{}, err
	}
	id := newID(webhookPrefix)
	secret := newSecret()
	ct, nonce := s.box.seal(creator.Tenant, id, secret)
	row, err := s.store.CreateWebhook(ctx, store.Webhook{
		TenantID: creator.Tenant, WebhookID: id, WorkflowKey: workflowKey,
		SecretCiphertext: ct, SecretNonce: nonce,
		CreatedBy: creator.Sub, TenantName: creator.TenantName, Scopes: creator.Scopes, ToolPolicy: policy,
	})
	if err != nil {
		return CreatedWebhook{}, notFoundAs(err, "workflow %q not found", workflowKey)
	}
	s.log.Info("webhook created", "webhook", id, "tenant", creator.Tenant, "workflowKey", workflowKey, "by", creator.Sub)
	return CreatedWebhook{
		WebhookID: id, WorkflowKey: workflowKey, Secret: secret, URL: WebhookPath(id),
		Actor: webhookActor(row), ToolPolicyView: webhookToolPolicy(row), CreatedAt: row.CreatedAt,
	}, nil
}

func webhookView(r store.Webhook) WebhookView {
	return WebhookView{WebhookID: r.WebhookID, WorkflowKey: r.WorkflowKey, URL: WebhookPath(r.WebhookID),
		CreatedBy: r.CreatedBy, CreatedAt: r.CreatedAt, Actor: webhookActor(r), ToolPolicyView: webhookToolPolicy(r)}
}

// liveWebhook returns a live webhook of (tenant, workflow key); anything
// else is NOT_FOUND.
func (s *Service) liveWebhook(ctx context.Context, tenantID, workflowKey, webhookID string) (store.Webhook, error) {
	missing := failure.New(failure.CodeNotFound, "webhook %q not found", webhookID)
	if !webhookIDPattern.MatchString(webhookID) {
		return store.Webhook{}, missing
	}
	row, err := s.store.GetWebhook(ctx, tenantID, webhookID)
	if errors.Is(err, failure.ErrNotFound) || (err == nil && (row.WorkflowKey != workflowKey || row.DeletedAt != nil)) {
		return store.Webhook{}, missing
	}
	return row, err
}

// GetWebhook returns one live webhook (never its secret) with its recent
// refused deliveries.
func (s *Service) GetWebhook(ctx context.Context, tenantID, workflowKey, webhookID string) (WebhookView, error) {
	row, err := s.liveWebhook(ctx, tenantID, workflowKey, webhookID)
	if err != nil {
		return WebhookView{}, err
	}
	v := webhookView(row)
	refusals, err := s.store.ListRefusals(ctx, tenantID, store.BridgeWebhook, webhookID, recentRefusals)
	if err != nil {
		return WebhookView{}, err
	}
	v.Refusals = make([]*Refusal, 0, len(refusals))
	for _, r := range refusals {
		v.Refusals = append(v.Refusals, refusalView(r))
	}
	if len(v.Refusals) > 0 {
		v.LastRefusal = v.Refusals[0]
	}
	return v, nil
}

// SetWebhookToolPolicy replaces a live webhook's tool policy, as
// SetScheduleToolPolicy does a schedule's.
func (s *Service) SetWebhookToolPolicy(ctx context.Context, caller auth.Principal, workflowKey, webhookID string, policy []string) (WebhookView, error) {
	row, err := s.liveWebhook(ctx, caller.Tenant, workflowKey, webhookID)
	if err != nil {
		return WebhookView{}, err
	}
	next, err := s.replacementPolicy(ctx, caller, row.CreatedBy, row.Scopes, row.ToolPolicy, policy)
	if err != nil {
		return WebhookView{}, err
	}
	row, err = s.store.SetWebhookToolPolicy(ctx, caller.Tenant, workflowKey, webhookID, next, caller.Sub)
	if err != nil {
		return WebhookView{}, notFoundAs(err, "webhook %q not found", webhookID)
	}
	s.log.Info("webhook tool policy set", "webhook", webhookID, "tenant", caller.Tenant, "workflowKey", workflowKey,
		"by", caller.Sub, "toolPolicy", next)
	return webhookView(row), nil
}

func webhookActor(w store.Webhook) ServiceActorView {
	return ServiceActorView{Kind: "service", Sub: store.BridgeWebhook + ":" + w.WebhookID, ConfiguredBy: w.CreatedBy}
}

// ListWebhooks lists a workflow's live webhooks after the cursor. A
// workflow the tenant does not have is NOT_FOUND.
func (s *Service) ListWebhooks(ctx context.Context, tenantID, workflowKey string, after *store.BridgeCursor, limit int) ([]WebhookView, error) {
	if _, err := s.store.GetWorkflow(ctx, tenantID, workflowKey); err != nil {
		return nil, notFoundAs(err, "workflow %q not found", workflowKey)
	}
	rows, err := s.store.ListWebhooks(ctx, tenantID, workflowKey, after, limit)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(rows))
	for i, r := range rows {
		ids[i] = r.WebhookID
	}
	last, err := s.store.LatestRefusals(ctx, tenantID, store.BridgeWebhook, ids)
	if err != nil {
		return nil, err
	}
	out := make([]WebhookView, 0, len(rows))
	for _, r := range rows {
		v := webhookView(r)
		if ref, ok := last[r.WebhookID]; ok {
			v.LastRefusal = refusalView(ref)
		}
		out = append(out, v)
	}
	return out, nil
}

// DeleteWebhook withdraws a webhook: later deliveries are NOT_FOUND.
func (s *Service) DeleteWebhook(ctx context.Context, tenantID, workflowKey, webhookID string) error {
	if !webhookIDPattern.MatchString(webhookID) {
		return failure.New(failure.CodeNotFound, "webhook %q not found", webhookID)
	}
	if err := s.store.DeleteWebhook(ctx, tenantID, workflowKey, webhookID); err != nil {
		return notFoundAs(err, "webhook %q not found", webhookID)
	}
	s.log.Info("webhook deleted", "webhook", webhookID, "tenant", tenantID, "workflowKey", workflowKey)
	return nil
}

// Delivery is one POST /hooks/{id}.
type Delivery struct {
	WebhookID string
	// Signature is the Weft-Signature header; EventID is Weft-Event-Id.
	Signature string
	EventID   string
	// Body is the raw request body (at most MaxWebhookBody), the run input.
	Body []byte
}

// errUnknownWebhook is the one answer for a malformed, unknown or deleted
// webhook id, so the answer tells nothing about which.
var errUnknownWebhook = failure.New(failure.CodeNotFound, "webhook not found")

// Deliver authenticates a delivery by its signature and enqueues its body
// as the run input, as the webhook's service actor, keyed by the event id:
// a replayed event answers the run it started (Accepted.Created false)
// and never starts a second one.
func (s *Service) Deliver(ctx context.Context, d Delivery) (starter.Accepted, error) {
	if !webhookIDPattern.MatchString(d.WebhookID) {
		return starter.Accepted{}, errUnknownWebhook
	}
	w, err := s.store.LiveWebhook(ctx, d.WebhookID)
	if errors.Is(err, failure.ErrNotFound) {
		return starter.Accepted{}, errUnknownWebhook
	}
	if err != nil {
		return starter.Accepted{}, err
	}
	secret, err := s.box.open(w.TenantID, w.WebhookID, w.SecretCiphertext, w.SecretNonce)
	if err != nil {
		return starter.Accepted{}, failure.Wrap(err, failure.CodeInternal, "the webhook secret cannot be read")
	}
	if err := VerifySignature(secret, d.Signature, d.Body, s.now()); err != nil {
		return starter.Accepted{}, err
	}
	if err := checkEventID(d.EventID); err != nil {
		return starter.Accepted{}, err
	}
	if !json.Valid(d.Body) {
		return starter.Accepted{}, failure.New(failure.CodeInvalidJSON, "the request body (the run input) is not valid JSON")
	}
	acc, err := s.enqueue(ctx, serviceActor{
		kind: store.BridgeWebhook, id: w.WebhookID, tenantID: w.TenantID, tenantName: w.TenantName,
		workflowKey: w.WorkflowKey, createdBy: w.CreatedBy, scopes: w.Scopes, toolPolicy: w.ToolPolicy,
	}, d.Body, DeliveryKey(w.WebhookID, d.EventID))
	var refused *refusedError
	if errors.As(err, &refused) {
		return starter.Accepted{}, refused.fe
	}
	return acc, err
}

// checkEventID requires 1 to MaxEventIDLen visible ASCII characters.
func checkEventID(id string) error {
	if id == "" {
		return failure.New(failure.CodeInvalidRequest, "the %s header is required: it makes a replayed event start no second run", EventIDHeader)
	}
	if utf8.RuneCountInString(id) > MaxEventIDLen {
		return failure.New(failure.CodeInvalidRequest, "%s must be at most %d characters", EventIDHeader, MaxEventIDLen)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < 0x21 || id[i] > 0x7e {
			return failure.New(failure.CodeInvalidRequest, "%s must be visible ASCII characters", EventIDHeader)
		}
	}
	return nil
}

// DeliveryKey is the idempotency key of a delivery: "<webhook id>:<event
// id>", or "<webhook id>:sha256=<hex>" when that would exceed the starter's
// key limit (long event ids stay distinct and stable).
func DeliveryKey(webhookID, eventID string) string {
	key := webhookID + ":" + eventID
	if utf8.RuneCountInString(key) <= starter.MaxIdempotencyKeyLen {
		return key
	}
	h := sha256.Sum256([]byte(eventID))
	return webhookID + ":sha256=" + hex.EncodeToString(h[:])
}
