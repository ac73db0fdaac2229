// Package failure holds weft's coded errors. Every error a client can see
// carries a stable Code; the HTTP status is chosen in one table in package api.
package failure

import (
	"errors"
	"fmt"
)

// Stable error codes shared across packages. Graph issue codes live in package graph.
const (
	CodeUnauthenticated     = "UNAUTHENTICATED"
	CodeMissingScope        = "MISSING_SCOPE"
	CodeNotFound            = "NOT_FOUND"
	CodeInvalidJSON         = "INVALID_JSON"
	CodeInvalidDocument     = "INVALID_DOCUMENT"
	CodeDocumentTooLarge    = "DOCUMENT_TOO_LARGE"
	CodeInvalidRequest      = "INVALID_REQUEST"
	CodeInvalidKey          = "INVALID_KEY"
	CodeAlreadyExists       = "ALREADY_EXISTS"
	CodeRevisionConflict    = "REVISION_CONFLICT"
	CodeInvalidGraph        = "INVALID_GRAPH"
	CodeInvalidInput        = "INVALID_INPUT"
	CodeIdempotencyConflict = "IDEMPOTENCY_CONFLICT"
	CodePermissionDenied    = "PERMISSION_DENIED"
	CodeCursorInvalid       = "CURSOR_INVALID"
	CodeNotPublished        = "NOT_PUBLISHED"
	CodeRunNotActive        = "RUN_NOT_ACTIVE"
	CodeUnavailable         = "UNAVAILABLE"
	// CodeStoreUnavailable: PostgreSQL cannot be reached right now; the
	// request changed nothing and may be repeated (503, Retry-After).
	CodeStoreUnavailable = "STORE_UNAVAILABLE"
	CodeInternal         = "INTERNAL"
)

// Error is a coded error safe to show a client. Err, if set, is the internal
// cause: it is logged, never shown.
type Error struct {
	Code    string
	Message string
	Details map[string]any
	Err     error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

// Unwrap returns the internal cause.
func (e *Error) Unwrap() error { return e.Err }

// New returns a coded error.
func New(code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns a coded error with an internal cause.
func Wrap(err error, code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...), Err: err}
}

// WithDetails returns e with details attached.
func (e *Error) WithDetails(d map[string]any) *Error {
	e.Details = d
	return e
}

// CodeOf returns the code of the first *Error in err's chain, or CodeInternal.
func CodeOf(err error) string {
	var fe *Error
	if errors.As(err, &fe) {
		return fe.Code
	}
	return CodeInternal
}

// ErrNotFound is the sentinel stores return for a missing row; callers map it
// to a coded NOT_FOUND error.
var ErrNotFound = errors.New("not found")
