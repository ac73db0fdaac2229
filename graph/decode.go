package graph

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/weftworks/weft/jsonstrict"
)

// Decode error codes. They match the failure package's codes of the same name
// so the API can pass them through unchanged (400, 400 and 413).
const (
	CodeInvalidJSON      = "INVALID_JSON"
	CodeInvalidDocument  = "INVALID_DOCUMENT"
	CodeDocumentTooLarge = "DOCUMENT_TOO_LARGE"
)

// DecodeError is why a document is not well-formed. A draft may hold graph
// issues, but never a DecodeError: those are refused before anything is
// stored.
type DecodeError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	// Path is a JSON pointer to the offending value, when one is known.
	Path string `json:"path,omitempty"`
	// Line and Column (1-based) locate the problem in the source text when
	// the decoder knows them (YAML documents: see graphyaml.ParseYAML); 0 otherwise.
	Line   int `json:"line,omitempty"`
	Column int `json:"column,omitempty"`
}

// Error renders the code, the path and the source position when known, and
// the message.
func (e *DecodeError) Error() string {
	where := ""
	if e.Path != "" {
		where = " at " + e.Path
	}
	if e.Line > 0 {
		where += fmt.Sprintf(" (line %d, column %d)", e.Line, e.Column)
	}
	return e.Code + where + ": " + e.Message
}

// Decode strictly decodes a JSON graph document: valid UTF-8 JSON, exactly
// one top-level object, no duplicate keys (last-wins would make two readers
// see different graphs), no unknown or case-folded field names, no wrong
// types, no null instead of a value, no string or number RFC 8785 cannot
// canonicalize (package jsonstrict), and schemaVersion 1. The offending
// value is named by its JSON pointer. It does not validate the graph; see
// Validate.
func Decode(data []byte) (*Document, error) {
	if len(data) > DefaultLimits.MaxDocumentBytes {
		return nil, &DecodeError{Code: CodeDocumentTooLarge,
			Message: fmt.Sprintf("document is %d bytes; the limit is %d", len(data), DefaultLimits.MaxDocumentBytes)}
	}
	var doc Document
	if err := jsonstrict.Decode(data, &doc, jsonstrict.Options{}); err != nil {
		var se *jsonstrict.Error
		if !errors.As(err, &se) {
			return nil, &DecodeError{Code: CodeInvalidDocument, Message: err.Error()}
		}
		de := &DecodeError{Code: CodeInvalidDocument, Path: Pointer(se.Path...), Message: se.Message}
		if se.Syntax {
			de.Code = CodeInvalidJSON
		}
		if len(se.Path) == 0 && strings.HasPrefix(se.Message, "must be an object") {
			de.Message = "document must be a JSON object"
		}
		return nil, de
	}
	if doc.SchemaVersion != SchemaVersion {
		return nil, &DecodeError{Code: CodeInvalidDocument, Path: "/schemaVersion",
			Message: fmt.Sprintf("unsupported schemaVersion %d; only %d is understood", doc.SchemaVersion, SchemaVersion)}
	}
	return &doc, nil
}

// DecodeStored decodes a document read back from storage (a saved draft),
// reporting a failure as a graph issue rather than an error: a stored draft
// is work in progress and what publication or simulation refuses is shown
// with the graph's other issues. PostgreSQL reformats jsonb, so the bytes
// are compacted first and the size limit applies to what was authored.
func DecodeStored(raw json.RawMessage) (*Document, []Issue) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, raw); err != nil {
		return nil, []Issue{{Code: CodeInvalidJSON, Message: err.Error()}}
	}
	doc, err := Decode(buf.Bytes())
	if err != nil {
		var de *DecodeError
		if errors.As(err, &de) {
			return nil, []Issue{{Code: de.Code, Path: de.Path, Message: de.Message}}
		}
		return nil, []Issue{{Code: CodeInvalidDocument, Message: err.Error()}}
	}
	return doc, nil
}
