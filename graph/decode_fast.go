package graph

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
)

// This file is Decode's one-pass path: a strict decoder written for
// Document that checks and fills the struct while reading the bytes once,
// instead of the checking path's four passes (json.Valid, the duplicate-key
// scan, a generic tree plus its shape check, then json.Unmarshal). It
// accepts exactly the documents the checking path accepts and builds the
// same Document (FuzzDecodeFast checks both directions on arbitrary bytes).
// It reports nothing: on any problem, or anything it does not handle
// (nesting deeper than fastMaxDepth), Decode runs the checking path, which
// finds the problem and reports it exactly as before.

// fastMaxDepth bounds the nesting of free-form values (literals, schemas)
// the one-pass path follows; deeper documents take the checking path.
const fastMaxDepth = 200

type fastDecoder struct {
	src   []byte
	pos   int
	depth int
	// scratch holds the unescaped bytes of the last string read with
	// escapes.
	scratch []byte
}

// decodeFast decodes data (valid UTF-8, within the size limit) or reports
// false.
func decodeFast(data []byte) (*Document, bool) {
	d := fastDecoder{src: data}
	doc := &Document{}
	d.ws()
	if !d.document(doc) {
		return nil, false
	}
	d.ws()
	if d.pos != len(d.src) || doc.SchemaVersion != SchemaVersion {
		return nil, false
	}
	return doc, true
}

func (d *fastDecoder) ws() { d.pos = skipWS(d.src, d.pos) }

// peek returns the next byte after whitespace, or 0 at the end.
func (d *fastDecoder) peek() byte {
	d.ws()
	if d.pos < len(d.src) {
		return d.src[d.pos]
	}
	return 0
}

// object reads an object, calling member with each unescaped key (valid
// only during the call) with d positioned at the value, which member must
// consume. Keys must be distinct: member reports a repeated key as false.
func (d *fastDecoder) object(member func(key []byte) bool) bool {
	if d.peek() != '{' {
		return false
	}
	d.pos++
	if d.peek() == '}' {
		d.pos++
		return true
	}
	for {
		if d.peek() != '"' {
			return false
		}
		key, ok := d.stringBytes()
		if !ok || d.peek() != ':' {
			return false
		}
		d.pos++
		d.ws()
		if !member(key) {
			return false
		}
		switch d.peek() {
		case ',':
			d.pos++
		case '}':
			d.pos++
			return true
		default:
			return false
		}
	}
}

// array reads an array, calling elem with d positioned at each element.
func (d *fastDecoder) array(elem func() bool) bool {
	if d.peek() != '[' {
		return false
	}
	d.pos++
	if d.peek() == ']' {
		d.pos++
		return true
	}
	for {
		d.ws()
		if !elem() {
			return false
		}
		switch d.peek() {
		case ',':
			d.pos++
		case ']':
			d.pos++
			return true
		default:
			return false
		}
	}
}

// stringBytes reads the JSON string at d.pos (see scanString); the content
// is valid until the next call.
func (d *fastDecoder) stringBytes() ([]byte, bool) {
	s, end, _, ok := scanString(d.src, d.pos, &d.scratch)
	if ok {
		d.pos = end
	}
	return s, ok
}

// string reads a JSON string value.
func (d *fastDecoder) string() (string, bool) {
	if d.peek() != '"' {
		return "", false
	}
	b, ok := d.stringBytes()
	return string(b), ok
}

// number reads a JSON number and returns its text.
func (d *fastDecoder) number() ([]byte, bool) {
	start := d.pos
	end, _, ok := scanNumber(d.src, start)
	if !ok {
		return nil, false
	}
	d.pos = end
	return d.src[start:end], true
}

// int reads an integer (no fraction or exponent, within int64), as
// json.Unmarshal fills an int field.
func (d *fastDecoder) int() (int, bool) {
	tok, ok := d.number()
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(string(tok), 10, 64)
	if err != nil || int64(int(n)) != n {
		return 0, false
	}
	return int(n), true
}

// float reads a finite number.
func (d *fastDecoder) float() (float64, bool) {
	tok, ok := d.number()
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(string(tok), 64)
	if err != nil || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}

// raw reads any value for a json.RawMessage field and returns a copy of its
// text. Like the checking path it refuses duplicate keys, unpaired
// surrogate escapes and numbers a float64 cannot hold anywhere inside.
func (d *fastDecoder) raw() (json.RawMessage, bool) {
	start := d.pos
	if !d.skip() {
		return nil, false
	}
	return bytes.Clone(d.src[start:d.pos]), true
}

// skip reads and checks one free-form value.
func (d *fastDecoder) skip() bool {
	if d.pos >= len(d.src) {
		return false
	}
	switch c := d.src[d.pos]; {
	case c == '{':
		if d.depth++; d.depth > fastMaxDepth {
			return false
		}
		// Objects in documents are small; a linear scan of the keys seen
		// is cheaper than a map below a few dozen keys.
		var keys []string
		var set map[string]struct{}
		ok := d.object(func(key []byte) bool {
			if set != nil {
				if _, dup := set[string(key)]; dup {
					return false
				}
				set[string(key)] = struct{}{}
			} else {
				for _, k := range keys {
					if k == string(key) {
						return false
					}
				}
				keys = append(keys, string(key))
				if len(keys) > 32 {
					set = make(map[string]struct{}, 2*len(keys))
					for _, k := range keys {
						set[k] = struct{}{}
					}
				}
			}
			return d.skip()
		})
		d.depth--
		return ok
	case c == '[':
		if d.depth++; d.depth > fastMaxDepth {
			return false
		}
		ok := d.array(d.skip)
		d.depth--
		return ok
	case c == '"':
		_, ok := d.stringBytes()
		return ok
	case c == 't':
		return d.literal("true")
	case c == 'f':
		return d.literal("false")
	case c == 'n':
		return d.literal("null")
	}
	tok, ok := d.number()
	if !ok {
		return false
	}
	if len(tok) > 15 || bytes.ContainsAny(tok, "eE") {
		// Only these can be out of float64 range.
		f, err := strconv.ParseFloat(string(tok), 64)
		if err != nil || math.IsInf(f, 0) {
			return false
		}
	}
	return true
}

func (d *fastDecoder) literal(lit string) bool {
	if !bytes.HasPrefix(d.src[d.pos:], []byte(lit)) {
		return false
	}
	d.pos += len(lit)
	return true
}

// field reports whether bit is new in *seen and marks it: a struct field
// named twice is a duplicate key.
func field(seen *uint32, bit uint) bool {
	if *seen&(1<<bit) != 0 {
		return false
	}
	*seen |= 1 << bit
	return true
}

// read stores the value that val reads in *dst and reports val's ok.
func read[V any](dst *V, val func() (V, bool)) bool {
	v, ok := val()
	*dst = v
	return ok
}

// arrayOf reads an array into *dst (never nil), reading each element with
// val.
func arrayOf[V any](d *fastDecoder, dst *[]V, val func() (V, bool)) bool {
	*dst = []V{}
	return d.array(func() bool {
		v, ok := val()
		*dst = append(*dst, v)
		return ok
	})
}

// mapOf reads an object with distinct keys into *dst, reading each value
// with val.
func mapOf[V any](d *fastDecoder, dst *map[string]V, val func() (V, bool)) bool {
	m := map[string]V{}
	*dst = m
	return d.object(func(key []byte) bool {
		if _, dup := m[string(key)]; dup {
			return false
		}
		v, ok := val()
		m[string(key)] = v
		return ok
	})
}

func (d *fastDecoder) document(doc *Document) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		switch string(key) {
		case "schemaVersion":
			return field(&seen, 0) && read(&doc.SchemaVersion, d.int)
		case "schemas":
			return field(&seen, 1) && mapOf(d, &doc.Schemas, d.raw)
		case "nodes":
			return field(&seen, 2) && arrayOf(d, &doc.Nodes, d.node)
		case "edges":
			return field(&seen, 3) && arrayOf(d, &doc.Edges, d.edge)
		case "toolsets":
			return field(&seen, 4) && mapOf(d, &doc.Toolsets, d.toolset)
		case "tools":
			return field(&seen, 5) && read(&doc.Tools, d.string)
		}
		return false
	})
}

func (d *fastDecoder) node() (Node, bool) {
	var n Node
	var seen uint32
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return field(&seen, 0) && read(&n.ID, d.string)
		case "kind":
			var k string
			ok := field(&seen, 1) && read(&k, d.string)
			n.Kind = Kind(k)
			return ok
		case "inputs":
			return field(&seen, 2) && mapOf(d, &n.Inputs, d.string)
		case "outputs":
			return field(&seen, 3) && mapOf(d, &n.Outputs, d.string)
		case "language":
			return field(&seen, 4) && read(&n.Language, d.string)
		case "expression":
			return field(&seen, 5) && read(&n.Expression, d.string)
		case "schema":
			return field(&seen, 6) && read(&n.Schema, d.raw)
		case "agent":
			return field(&seen, 7) && read(&n.Agent, d.agentRef)
		case "tools":
			return field(&seen, 8) && read(&n.Tools, d.string)
		case "action":
			return field(&seen, 9) && read(&n.Action, d.actionRef)
		case "mapping":
			return field(&seen, 10) && mapOf(d, &n.Mapping, d.mapping)
		case "retry":
			return field(&seen, 11) && read(&n.Retry, d.retry)
		case "timeoutMs":
			return field(&seen, 12) && read(&n.TimeoutMs, d.int)
		}
		return false
	})
	return n, ok
}

func (d *fastDecoder) edge() (Edge, bool) {
	var e Edge
	var seen uint32
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "from":
			return field(&seen, 0) && read(&e.From, d.string)
		case "to":
			return field(&seen, 1) && read(&e.To, d.string)
		}
		return false
	})
	return e, ok
}

func (d *fastDecoder) agentRef() (*AgentRef, bool) {
	r := &AgentRef{}
	var seen uint32
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "key":
			return field(&seen, 0) && read(&r.Key, d.string)
		case "revision":
			return field(&seen, 1) && read(&r.Revision, d.int)
		}
		return false
	})
	return r, ok
}

func (d *fastDecoder) actionRef() (*ActionRef, bool) {
	r := &ActionRef{}
	var seen uint32
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "id":
			return field(&seen, 0) && read(&r.ID, d.string)
		case "version":
			return field(&seen, 1) && read(&r.Version, d.int)
		}
		return false
	})
	return r, ok
}

func (d *fastDecoder) retry() (*Retry, bool) {
	r := &Retry{}
	var seen uint32
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "maxAttempts":
			return field(&seen, 0) && read(&r.MaxAttempts, d.int)
		case "initialIntervalMs":
			return field(&seen, 1) && read(&r.InitialIntervalMs, d.int)
		case "backoff":
			return field(&seen, 2) && read(&r.Backoff, d.float)
		case "maxIntervalMs":
			return field(&seen, 3) && read(&r.MaxIntervalMs, d.int)
		}
		return false
	})
	return r, ok
}

func (d *fastDecoder) mapping() (Mapping, bool) {
	var m Mapping
	var seen uint32
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "literal":
			return field(&seen, 0) && read(&m.Literal, d.raw)
		case "pointer":
			m.Pointer = new(string)
			return field(&seen, 1) && read(m.Pointer, d.string)
		case "template":
			m.Template = new(string)
			return field(&seen, 2) && read(m.Template, d.string)
		case "bindings":
			return field(&seen, 3) && mapOf(d, &m.Bindings, d.string)
		}
		return false
	})
	return m, ok
}

func (d *fastDecoder) toolset() (Toolset, bool) {
	var t Toolset
	var seen uint32
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "tools":
			return field(&seen, 0) && arrayOf(d, &t.Tools, d.string)
		case "skill":
			return field(&seen, 1) && read(&t.Skill, d.string)
		case "summary":
			return field(&seen, 2) && read(&t.Summary, d.string)
		}
		return false
	})
	return t, ok
}
