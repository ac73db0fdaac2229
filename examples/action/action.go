// Package action is the worked example of README "Adding an action in Go":
// two actions over a small tenant-owned contact directory, one that reads
// (crm.contact.lookup@1) and one that writes through the idempotency key
// the harness hands it (crm.contact.tag@1), and the registry a worker
// serves them from.
package action

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"

	"go.temporal.io/sdk/temporal"

	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/graph"
)

// Permissions the actions require. A run's permission snapshot must hold
// them: an action node is refused (PERMISSION_DENIED) and an agent is not
// offered the tool (tool.denied) otherwise.
const (
	PermRead  = "crm.read"
	PermWrite = "crm.write"
)

// LookupV1 is crm.contact.lookup@1. A contract is immutable once a worker
// published it: change anything (schemas, risk, permissions, timeout) and
// register it as version 2.
var LookupV1 = graph.ActionContract{
	ID: "crm.contact.lookup", Version: 1, Risk: graph.RiskRead,
	Description: "Look a contact of the tenant up by e-mail.",
	// additionalProperties:false also makes the harness refuse a stray
	// field (a "tenantId", say) before the handler runs.
	InputSchema: json.RawMessage(`{"type":"object","required":["email"],"additionalProperties":false,
		"properties":{"email":{"type":"string","maxLength":254}}}`),
	OutputSchema: json.RawMessage(`{"type":"object","required":["found"],
		"properties":{"found":{"type":"boolean"},"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}}}`),
	RequiredPermissions: []string{PermRead},
	TimeoutMs:           5000,
	Idempotency:         catalog.IdempotencyNone,
}

// TagV1 is crm.contact.tag@1: a workspace write, so it declares the ledger
// idempotency and honours Call.IdempotencyKey.
var TagV1 = graph.ActionContract{
	ID: "crm.contact.tag", Version: 1, Risk: graph.RiskWorkspaceWrite,
	Description: "Add a tag to a contact of the tenant.",
	InputSchema: json.RawMessage(`{"type":"object","required":["email","tag"],"additionalProperties":false,
		"properties":{"email":{"type":"string","maxLength":254},"tag":{"type":"string","maxLength":40}}}`),
	OutputSchema:        json.RawMessage(`{"type":"object","required":["tags"],"properties":{"tags":{"type":"array","items":{"type":"string"}}}}`),
	RequiredPermissions: []string{PermWrite},
	TimeoutMs:           5000,
	Idempotency:         catalog.IdempotencyLedger,
}

// Directory is the example's "business system": contacts per tenant. A
// real action would call a service that owns its data and validation.
type Directory struct {
	mu       sync.Mutex
	contacts map[string]map[string][]string // tenant → e-mail → tags
	applied  map[string]bool                // tenant + idempotency key → applied
}

// NewDirectory returns an empty directory.
func NewDirectory() *Directory {
	return &Directory{contacts: map[string]map[string][]string{}, applied: map[string]bool{}}
}

// Add stores a contact of tenant.
func (d *Directory) Add(tenant, email string, tags ...string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.contacts[tenant] == nil {
		d.contacts[tenant] = map[string][]string{}
	}
	d.contacts[tenant][strings.ToLower(email)] = tags
}

// Tags returns a contact's tags.
func (d *Directory) Tags(tenant, email string) ([]string, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	tags, ok := d.contacts[tenant][strings.ToLower(email)]
	return tags, ok
}

// Lookup is the crm.contact.lookup@1 action.
func Lookup(d *Directory) catalog.Action {
	return catalog.Action{Contract: LookupV1, Handler: func(ctx context.Context, call catalog.Call) (json.RawMessage, error) {
		var in struct {
			Email string `json:"email"`
		}
		if err := json.Unmarshal(call.Input, &in); err != nil { // already schema-valid
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), "SCHEMA_VIOLATION", err)
		}
		// The tenant comes from the run (call.TenantID), never from the input.
		tags, ok := d.Tags(call.TenantID, in.Email)
		if !ok {
			return json.Marshal(map[string]any{"found": false})
		}
		return json.Marshal(map[string]any{"found": true, "name": in.Email, "tags": tags})
	}}
}

// Tag is the crm.contact.tag@1 action. It applies a key once: the same
// node (or agent tool call) retried after a crash passes the same
// call.IdempotencyKey, and the harness also replays its first result from
// the ledger, so a tag is never added twice.
func Tag(d *Directory) catalog.Action {
	return catalog.Action{Contract: TagV1, Handler: func(ctx context.Context, call catalog.Call) (json.RawMessage, error) {
		if call.IdempotencyKey == "" {
			return nil, temporal.NewNonRetryableApplicationError("an idempotency key is required", "ACTION_FAILED", nil)
		}
		var in struct {
			Email string `json:"email"`
			Tag   string `json:"tag"`
		}
		if err := json.Unmarshal(call.Input, &in); err != nil {
			return nil, temporal.NewNonRetryableApplicationError(err.Error(), "SCHEMA_VIOLATION", err)
		}
		d.mu.Lock()
		defer d.mu.Unlock()
		email := strings.ToLower(in.Email)
		tags, ok := d.contacts[call.TenantID][email]
		if !ok {
			// Not retryable: another attempt would fail the same way.
			return nil, temporal.NewNonRetryableApplicationError(fmt.Sprintf("no contact %q", in.Email), "ACTION_FAILED", nil)
		}
		if key := call.TenantID + "\x00" + call.IdempotencyKey; !d.applied[key] {
			tags = append(tags, in.Tag)
			d.contacts[call.TenantID][email] = tags
			d.applied[key] = true
		}
		return json.Marshal(map[string]any{"tags": tags})
	}}
}

// Actions are this package's actions, for worker.Deps.Actions.
func Actions(d *Directory) []catalog.Action { return []catalog.Action{Lookup(d), Tag(d)} }

// Registry is what a worker serving them registers: the built-ins plus
// these. catalog.NewRegistry refuses a duplicate id@version, a missing
// handler and schemas that do not compile, so a mistake stops the worker at
// start, not a run.
func Registry(builtins catalog.BuiltinDeps, d *Directory) (*catalog.Registry, error) {
	return catalog.NewRegistry(append(catalog.Builtins(builtins), Actions(d)...)...)
}
