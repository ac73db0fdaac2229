package graph

import (
	"bytes"
	"encoding/json"
	"errors"
)

// DecodeValue decodes one JSON value keeping numbers exact (json.Number), so
// port values pass through mappings, merges and schema defaults without
// float rounding. Trailing data after the value is an error.
func DecodeValue(raw json.RawMessage) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("more than one JSON value")
	}
	return v, nil
}

// EncodeValue encodes v as JSON without HTML escaping: port values are data,
// not markup.
func EncodeValue(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}
