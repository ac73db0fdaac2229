package starter

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/weftworks/weft/auth"
	"github.com/weftworks/weft/failure"
	"github.com/weftworks/weft/graph"
)

// maxInputIssues bounds the validation errors listed in an INVALID_INPUT
// answer: a huge array failing item by item must not produce a huge body.
const maxInputIssues = 50

// WorkflowID is the deterministic Temporal workflow id of the run an
// idempotency key starts: weft-<workflow key>-<hex sha256(tenant \x00
// workflow key \x00 key)>. The key makes runs recognisable in the Temporal
// Web UI's list; the hash alone makes the id unique (the NUL separators
// keep ("a", "bc") and ("ab", "c") apart) and keeps tenant names and
// idempotency keys out of it. The key part is sanitised to the workflow key
// syntax and at most maxWorkflowIDKey characters, so the id stays well
// within Temporal's id length limit whatever it is given.
//
// Runs store the id they were started with and every operation reads it
// from the row, so runs started under the previous form
// (weft-<hex sha256>) keep working.
func WorkflowID(tenantID, workflowKey, idempotencyKey string) string {
	h := sha256.New()
	h.Write([]byte(tenantID))
	h.Write([]byte{0})
	h.Write([]byte(workflowKey))
	h.Write([]byte{0})
	h.Write([]byte(idempotencyKey))
	return "weft-" + workflowIDKey(workflowKey) + "-" + hex.EncodeToString(h.Sum(nil))
}

// maxWorkflowIDKey bounds the workflow key part of a workflow id (workflow
// keys are at most 63 characters already).
const maxWorkflowIDKey = 63

// workflowIDKey is key reduced to lowercase letters, digits and '-', at
// most maxWorkflowIDKey characters ("run" when nothing is left).
func workflowIDKey(key string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(key) {
		if b.Len() == maxWorkflowIDKey {
			break
		}
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "run"
	}
	return b.String()
}

// InputHash is hex sha256 of the RFC 8785 canonical form of input, so the
// same value sent with other key order or whitespace binds the same way.
func InputHash(input json.RawMessage) (string, error) {
	canon, err := graph.Canonical(input)
	if err != nil {
		return "", err
	}
	return graph.SHA256Hex(canon), nil
}

// normalizeInput returns the request input, JSON null when absent, and
// refuses anything that is not one JSON value.
func normalizeInput(in json.RawMessage) (json.RawMessage, error) {
	in = bytes.TrimSpace(in)
	if len(in) == 0 {
		return json.RawMessage("null"), nil
	}
	if !json.Valid(in) {
		return nil, failure.New(failure.CodeInvalidRequest, "input is not valid JSON")
	}
	return in, nil
}

// InputIssue is one reason an input does not match the input node's schema.
type InputIssue struct {
	// Path is a JSON pointer into the input.
	Path    string `json:"path"`
	Message string `json:"message"`
}

// validateInput checks input against the schema of the input node's out
// port. A compiled revision always has exactly one input node; its absence
// means a corrupt revision and is an internal error, not the caller's.
func validateInput(p *pinned, input json.RawMessage) error {
	errs, err := graph.SchemaErrors(p.input, input, maxInputIssues+1)
	if err == nil && errs == nil {
		return nil
	}
	issues := []InputIssue{}
	for _, e := range errs {
		issues = append(issues, InputIssue{Path: e.Path, Message: e.Message})
	}
	if err != nil {
		issues = append(issues, InputIssue{Path: "", Message: err.Error()})
	}
	truncated := len(issues) > maxInputIssues
	if truncated {
		issues = issues[:maxInputIssues]
	}
	details := map[string]any{"node": p.inputNode, "schema": p.inputName, "errors": issues}
	if truncated {
		details["truncated"] = true
	}
	return failure.New(failure.CodeInvalidInput, "input does not match the schema %q of input node %q", p.inputName, p.inputNode).
		WithDetails(details)
}

// checkPermissions refuses a live run whose permission snapshot lacks any
// node's required permission, listing what is missing overall and per node
// so the caller knows which node needs which scope.
func checkPermissions(c *graph.Compiled, have []string) error {
	missing := auth.Missing(have, c.Permissions)
	if len(missing) == 0 {
		return nil
	}
	byNode := map[string][]string{}
	ids := slices.Sorted(maps.Keys(c.NodePermissions))
	for _, id := range ids {
		if m := auth.Missing(have, c.NodePermissions[id]); len(m) > 0 {
			byNode[id] = m
		}
	}
	return failure.New(failure.CodePermissionDenied, "the caller lacks permissions this workflow's nodes require").
		WithDetails(map[string]any{"missing": missing, "nodes": byNode})
}
