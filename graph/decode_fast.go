package graph

import (
	"bytes"
	"encoding/json"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
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

func (d *fastDecoder) ws() {
	for d.pos < len(d.src) {
		switch d.src[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

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

// stringBytes reads a JSON string and returns its unescaped content: a
// slice of the source when it has no escapes, else of d.scratch (valid
// until the next call). Unpaired surrogate escapes are refused, as the
// checking path refuses them.
func (d *fastDecoder) stringBytes() ([]byte, bool) {
	p := d.pos + 1
	start := p
	for {
		if p >= len(d.src) {
			return nil, false
		}
		c := d.src[p]
		if c == '"' {
			d.pos = p + 1
			return d.src[start:p], true
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return nil, false
		}
		p++
	}
	out := append(d.scratch[:0], d.src[start:p]...)
	for {
		if p >= len(d.src) {
			return nil, false
		}
		c := d.src[p]
		if c == '"' {
			d.pos = p + 1
			d.scratch = out
			return out, true
		}
		if c < 0x20 {
			return nil, false
		}
		if c != '\\' {
			out = append(out, c)
			p++
			continue
		}
		if p+1 >= len(d.src) {
			return nil, false
		}
		switch d.src[p+1] {
		case '"', '\\', '/':
			out = append(out, d.src[p+1])
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			u, ok := hex4(d.src, p+2)
			if !ok {
				return nil, false
			}
			r := rune(u)
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || p+11 >= len(d.src) || d.src[p+6] != '\\' || d.src[p+7] != 'u' {
					return nil, false
				}
				lo, ok := hex4(d.src, p+8)
				if !ok || lo < 0xDC00 || lo > 0xDFFF {
					return nil, false
				}
				r = utf16.DecodeRune(r, rune(lo))
				p += 6
			}
			out = utf8.AppendRune(out, r)
			p += 4
		default:
			return nil, false
		}
		p += 2
	}
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
	start, p := d.pos, d.pos
	if p < len(d.src) && d.src[p] == '-' {
		p++
	}
	switch {
	case p < len(d.src) && d.src[p] == '0':
		p++
	case p < len(d.src) && d.src[p] >= '1' && d.src[p] <= '9':
		for p < len(d.src) && d.src[p] >= '0' && d.src[p] <= '9' {
			p++
		}
	default:
		return nil, false
	}
	if p < len(d.src) && d.src[p] == '.' {
		p++
		q := p
		for p < len(d.src) && d.src[p] >= '0' && d.src[p] <= '9' {
			p++
		}
		if p == q {
			return nil, false
		}
	}
	if p < len(d.src) && (d.src[p] == 'e' || d.src[p] == 'E') {
		p++
		if p < len(d.src) && (d.src[p] == '+' || d.src[p] == '-') {
			p++
		}
		q := p
		for p < len(d.src) && d.src[p] >= '0' && d.src[p] <= '9' {
			p++
		}
		if p == q {
			return nil, false
		}
	}
	d.pos = p
	return d.src[start:p], true
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

func (d *fastDecoder) document(doc *Document) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "schemaVersion":
			if ok = field(&seen, 0); ok {
				doc.SchemaVersion, ok = d.int()
			}
		case "schemas":
			if ok = field(&seen, 1); ok {
				doc.Schemas, ok = d.rawMap()
			}
		case "nodes":
			if ok = field(&seen, 2); ok {
				doc.Nodes = []Node{}
				ok = d.array(func() bool {
					doc.Nodes = append(doc.Nodes, Node{})
					return d.node(&doc.Nodes[len(doc.Nodes)-1])
				})
			}
		case "edges":
			if ok = field(&seen, 3); ok {
				doc.Edges = []Edge{}
				ok = d.array(func() bool {
					doc.Edges = append(doc.Edges, Edge{})
					return d.edge(&doc.Edges[len(doc.Edges)-1])
				})
			}
		case "toolsets":
			if ok = field(&seen, 4); ok {
				doc.Toolsets, ok = d.toolsets()
			}
		case "tools":
			if ok = field(&seen, 5); ok {
				doc.Tools, ok = d.string()
			}
		}
		return ok
	})
}

func (d *fastDecoder) node(n *Node) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "id":
			if ok = field(&seen, 0); ok {
				n.ID, ok = d.string()
			}
		case "kind":
			if ok = field(&seen, 1); ok {
				var k string
				k, ok = d.string()
				n.Kind = Kind(k)
			}
		case "inputs":
			if ok = field(&seen, 2); ok {
				n.Inputs, ok = d.stringMap()
			}
		case "outputs":
			if ok = field(&seen, 3); ok {
				n.Outputs, ok = d.stringMap()
			}
		case "language":
			if ok = field(&seen, 4); ok {
				n.Language, ok = d.string()
			}
		case "expression":
			if ok = field(&seen, 5); ok {
				n.Expression, ok = d.string()
			}
		case "schema":
			if ok = field(&seen, 6); ok {
				n.Schema, ok = d.raw()
			}
		case "agent":
			if ok = field(&seen, 7); ok {
				n.Agent = &AgentRef{}
				ok = d.agentRef(n.Agent)
			}
		case "tools":
			if ok = field(&seen, 8); ok {
				n.Tools, ok = d.string()
			}
		case "action":
			if ok = field(&seen, 9); ok {
				n.Action = &ActionRef{}
				ok = d.actionRef(n.Action)
			}
		case "mapping":
			if ok = field(&seen, 10); ok {
				n.Mapping, ok = d.mappings()
			}
		case "retry":
			if ok = field(&seen, 11); ok {
				n.Retry = &Retry{}
				ok = d.retry(n.Retry)
			}
		case "timeoutMs":
			if ok = field(&seen, 12); ok {
				n.TimeoutMs, ok = d.int()
			}
		}
		return ok
	})
}

func (d *fastDecoder) edge(e *Edge) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "from":
			if ok = field(&seen, 0); ok {
				e.From, ok = d.string()
			}
		case "to":
			if ok = field(&seen, 1); ok {
				e.To, ok = d.string()
			}
		}
		return ok
	})
}

func (d *fastDecoder) agentRef(r *AgentRef) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "key":
			if ok = field(&seen, 0); ok {
				r.Key, ok = d.string()
			}
		case "revision":
			if ok = field(&seen, 1); ok {
				r.Revision, ok = d.int()
			}
		}
		return ok
	})
}

func (d *fastDecoder) actionRef(r *ActionRef) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "id":
			if ok = field(&seen, 0); ok {
				r.ID, ok = d.string()
			}
		case "version":
			if ok = field(&seen, 1); ok {
				r.Version, ok = d.int()
			}
		}
		return ok
	})
}

func (d *fastDecoder) retry(r *Retry) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "maxAttempts":
			if ok = field(&seen, 0); ok {
				r.MaxAttempts, ok = d.int()
			}
		case "initialIntervalMs":
			if ok = field(&seen, 1); ok {
				r.InitialIntervalMs, ok = d.int()
			}
		case "backoff":
			if ok = field(&seen, 2); ok {
				r.Backoff, ok = d.float()
			}
		case "maxIntervalMs":
			if ok = field(&seen, 3); ok {
				r.MaxIntervalMs, ok = d.int()
			}
		}
		return ok
	})
}

func (d *fastDecoder) mapping(m *Mapping) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "literal":
			if ok = field(&seen, 0); ok {
				m.Literal, ok = d.raw()
			}
		case "pointer":
			if ok = field(&seen, 1); ok {
				var s string
				s, ok = d.string()
				m.Pointer = &s
			}
		case "template":
			if ok = field(&seen, 2); ok {
				var s string
				s, ok = d.string()
				m.Template = &s
			}
		case "bindings":
			if ok = field(&seen, 3); ok {
				m.Bindings, ok = d.stringMap()
			}
		}
		return ok
	})
}

func (d *fastDecoder) toolset(t *Toolset) bool {
	var seen uint32
	return d.object(func(key []byte) bool {
		var ok bool
		switch string(key) {
		case "tools":
			if ok = field(&seen, 0); ok {
				t.Tools = []string{}
				ok = d.array(func() bool {
					s, ok := d.string()
					t.Tools = append(t.Tools, s)
					return ok
				})
			}
		case "skill":
			if ok = field(&seen, 1); ok {
				t.Skill, ok = d.string()
			}
		}
		return ok
	})
}

func (d *fastDecoder) stringMap() (map[string]string, bool) {
	m := map[string]string{}
	ok := d.object(func(key []byte) bool {
		if _, dup := m[string(key)]; dup {
			return false
		}
		k := string(key)
		v, ok := d.string()
		m[k] = v
		return ok
	})
	return m, ok
}

func (d *fastDecoder) rawMap() (map[string]json.RawMessage, bool) {
	m := map[string]json.RawMessage{}
	ok := d.object(func(key []byte) bool {
		if _, dup := m[string(key)]; dup {
			return false
		}
		k := string(key)
		v, ok := d.raw()
		m[k] = v
		return ok
	})
	return m, ok
}

func (d *fastDecoder) mappings() (map[string]Mapping, bool) {
	m := map[string]Mapping{}
	ok := d.object(func(key []byte) bool {
		if _, dup := m[string(key)]; dup {
			return false
		}
		k := string(key)
		var v Mapping
		ok := d.mapping(&v)
		m[k] = v
		return ok
	})
	return m, ok
}

func (d *fastDecoder) toolsets() (map[string]Toolset, bool) {
	m := map[string]Toolset{}
	ok := d.object(func(key []byte) bool {
		if _, dup := m[string(key)]; dup {
			return false
		}
		k := string(key)
		var v Toolset
		ok := d.toolset(&v)
		m[k] = v
		return ok
	})
	return m, ok
}
