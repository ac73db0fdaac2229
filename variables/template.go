// Package variables implements weft's `{{ key }}` templates (SPEC §6): the
// pure template functions (Extract, Validate, Resolve, Tokenize) and the
// variable Registry that resolves a template on the server from trusted
// request data and registered sources.
//
// # Grammar
//
// A token is `{{`, optional inner whitespace (space, tab, CR, LF), a key, optional
// inner whitespace, `}}`. A key is a dot path whose segments start with a
// lowercase ASCII letter and continue with ASCII letters or digits (KeyPattern),
// e.g. `context.user.displayName`. Everything else is literal text:
//
//   - `\{{` is an escape: it renders as a literal `{{`, and what follows it is
//     scanned as ordinary text (so `\{{ a }}` renders `{{ a }}`). There is no
//     other escape; a backslash anywhere else is literal.
//   - An unterminated `{{` (no `}}` before the next brace) is literal text.
//   - Braces are matched innermost-first, like the regular expression
//     `\{\{[ \t\r\n]*(key)[ \t\r\n]*\}\}` scanning left to right: `{{{ a }}}` is a literal
//     `{`, the token `a`, and a literal `}`; `{{ {{ a }} }}` is literal `{{ `,
//     the token `a` and literal ` }}`.
//   - A closed brace pair without inner braces whose trimmed content is not a
//     key (`{{ not a key! }}`, `{{ }}`, `{{ __proto__ }}`, `{{ Foo }}`) is an
//     invalid token. Tokenize reports it as SegmentInvalid, Extract ignores it,
//     Resolve emits it verbatim, and Validate (and the Registry, and Check)
//     report its trimmed content as unknown: an author who wrote `{{ … }}`
//     expected a substitution, and a literal `{{` is written `\{{`.
//
// Substitution is one left-to-right pass and never recursive: a value that
// itself looks like a token is emitted verbatim. Only keys present in the
// values map resolve; there is no fallback, no eval and no expression syntax.
// Templates are scanned byte by byte, so any byte sequence (including invalid
// UTF-8) round-trips through Tokenize unchanged.
package variables

import (
	"regexp"
	"strings"
)

// KeyPattern matches a variable key: a dot path whose segments start with a
// lowercase ASCII letter followed by ASCII letters or digits (camelCase).
var KeyPattern = regexp.MustCompile(`^[a-z][a-zA-Z0-9]*(\.[a-z][a-zA-Z0-9]*)*$`)

// IsKey reports whether s is a valid variable key (it matches KeyPattern).
func IsKey(s string) bool {
	if s == "" {
		return false
	}
	start := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case start:
			if c < 'a' || c > 'z' {
				return false
			}
			start = false
		case c == '.':
			start = true
		case (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'):
		default:
			return false
		}
	}
	return !start
}

// SegmentKind classifies a Segment.
type SegmentKind string

// Segment kinds.
const (
	// SegmentText is literal text; it renders as itself.
	SegmentText SegmentKind = "text"
	// SegmentToken is a `{{ key }}` token; Segment.Key holds the trimmed key.
	SegmentToken SegmentKind = "token"
	// SegmentEscape is the escape `\{{`; it renders as `{{`.
	SegmentEscape SegmentKind = "escape"
	// SegmentInvalid is a closed `{{ … }}` whose trimmed content is not a key;
	// it renders as itself and Validate reports it as unknown.
	SegmentInvalid SegmentKind = "invalid"
)

// Segment is one piece of a tokenized template. The Text of all segments of a
// template concatenate back to the exact input.
type Segment struct {
	// Kind says how the segment renders.
	Kind SegmentKind `json:"kind"`
	// Text is the exact source text of the segment.
	Text string `json:"text"`
	// Key is the trimmed key of a SegmentToken, empty otherwise.
	Key string `json:"key,omitempty"`
}

// OnMissing chooses what Resolve does with a token whose key has no value.
type OnMissing int

const (
	// Keep leaves the token's source text verbatim (the default).
	Keep OnMissing = iota
	// Blank replaces the token with the empty string. Any other value
	// behaves like Keep.
	Blank
)

// Result is the outcome of Validate.
type Result struct {
	// Unknown lists, in first-seen order, the keys not among the available
	// definitions and the trimmed content of every invalid token.
	Unknown []string `json:"unknown"`
	// Forbidden lists, in first-seen order, the available keys whose
	// definition declares a scope the caller does not hold.
	Forbidden []string `json:"forbidden"`
}

// OK reports whether the template has neither unknown nor forbidden tokens.
func (r Result) OK() bool { return len(r.Unknown) == 0 && len(r.Forbidden) == 0 }

// piece kinds returned by the scanner.
const (
	pieceNone = iota
	pieceToken
	pieceEscape
	pieceInvalid
)

// piece is the next non-text construct found by scan.
type piece struct {
	kind       int
	start, end int // [start, end) of the construct's source text
	ks, ke     int // [ks, ke) of the trimmed content (token key or invalid content)
}

// scan finds the first token, escape or invalid token at or after byte i.
// It returns kind pieceNone when the rest of s is plain text.
func scan(s string, i int) piece {
	n := len(s)
	for j := i; j+1 < n; j++ {
		// Every construct contains `{{`; jump to the next `{`.
		q := strings.IndexByte(s[j:], '{')
		if q < 0 {
			break
		}
		j += q
		if j+1 >= n || s[j+1] != '{' {
			continue
		}
		if j > i && s[j-1] == '\\' {
			return piece{kind: pieceEscape, start: j - 1, end: j + 2}
		}
		// Fast path: `{{`, spaces, a valid key, spaces, `}}`.
		k := j + 2
		for k < n && isSpace(s[k]) {
			k++
		}
		ks := k
		for k < n && isLower(s[k]) {
			k++
			for k < n && isAlnum(s[k]) {
				k++
			}
			if k+1 < n && s[k] == '.' && isLower(s[k+1]) {
				k++
				continue
			}
			break
		}
		if ke := k; ke > ks {
			for k < n && isSpace(s[k]) {
				k++
			}
			if k+1 < n && s[k] == '}' && s[k+1] == '}' {
				return piece{kind: pieceToken, start: j, end: k + 2, ks: ks, ke: ke}
			}
		}
		// General case: `{{`, content without braces, `}}`, content not a key.
		k = j + 2
		for k < n && s[k] != '{' && s[k] != '}' {
			k++
		}
		if k+1 >= n || s[k] != '}' || s[k+1] != '}' {
			continue // not closed before the next brace: this `{` is literal
		}
		ks, ke := j+2, k
		for ks < ke && isSpace(s[ks]) {
			ks++
		}
		for ke > ks && isSpace(s[ke-1]) {
			ke--
		}
		kind := pieceInvalid
		if IsKey(s[ks:ke]) {
			kind = pieceToken
		}
		return piece{kind: kind, start: j, end: k + 2, ks: ks, ke: ke}
	}
	return piece{kind: pieceNone, start: n, end: n}
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isLower(c byte) bool { return c >= 'a' && c <= 'z' }

func isAlnum(c byte) bool {
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')
}

// Tokenize splits template into segments whose Text concatenate back to the
// exact input. Adjacent literal text forms one SegmentText. It never returns nil.
func Tokenize(template string) []Segment {
	segs := []Segment{}
	i := 0
	for i < len(template) {
		p := scan(template, i)
		if p.start > i {
			segs = append(segs, Segment{Kind: SegmentText, Text: template[i:p.start]})
		}
		switch p.kind {
		case pieceToken:
			segs = append(segs, Segment{Kind: SegmentToken, Text: template[p.start:p.end], Key: template[p.ks:p.ke]})
		case pieceEscape:
			segs = append(segs, Segment{Kind: SegmentEscape, Text: template[p.start:p.end]})
		case pieceInvalid:
			segs = append(segs, Segment{Kind: SegmentInvalid, Text: template[p.start:p.end]})
		}
		i = p.end
	}
	return segs
}

// Extract returns the distinct trimmed keys of the template's tokens in
// first-seen order. Invalid tokens are not keys and are not returned. It never
// returns nil.
func Extract(template string) []string {
	var keys distinct
	for i := 0; i < len(template); {
		p := scan(template, i)
		if p.kind == pieceToken {
			keys.add(template[p.ks:p.ke])
		}
		i = p.end
	}
	return keys.strings()
}

func appendDistinct(list []string, s string) []string {
	for _, x := range list {
		if x == s {
			return list
		}
	}
	return append(list, s)
}

// distinct collects strings in first-seen order without duplicates, in linear
// time however many distinct strings a template holds.
type distinct struct {
	list []string
	seen map[string]struct{}
}

// add appends s unless it was added before.
func (d *distinct) add(s string) {
	if d.seen != nil {
		if _, ok := d.seen[s]; ok {
			return
		}
		d.seen[s] = struct{}{}
		d.list = append(d.list, s)
		return
	}
	for _, x := range d.list {
		if x == s {
			return
		}
	}
	d.list = append(d.list, s)
	if len(d.list) == 32 {
		d.seen = make(map[string]struct{}, 64)
		for _, x := range d.list {
			d.seen[x] = struct{}{}
		}
	}
}

// strings returns the collected strings, never nil.
func (d *distinct) strings() []string {
	if d.list == nil {
		return []string{}
	}
	return d.list
}

// Validate checks template against the available definitions. Unknown holds
// the keys not in available plus the content of every invalid token; Forbidden
// holds the available keys whose definition has a non-empty Scope that is not
// in allowedScopes. A nil allowedScopes skips the scope check; a non-nil empty
// slice means no scope is held. Both fields are non-nil.
func Validate(template string, available []Definition, allowedScopes []string) Result {
	defs := make(map[string]*Definition, len(available))
	for i := range available {
		defs[available[i].Key] = &available[i]
	}
	var unknown, forbidden distinct
	for i := 0; i < len(template); {
		p := scan(template, i)
		i = p.end
		if p.kind != pieceToken && p.kind != pieceInvalid {
			continue
		}
		k := template[p.ks:p.ke]
		d, ok := defs[k]
		switch {
		case p.kind == pieceInvalid || !ok:
			unknown.add(k)
		case allowedScopes != nil && d.Scope != "" && !contains(allowedScopes, d.Scope):
			forbidden.add(k)
		}
	}
	return Result{Unknown: unknown.strings(), Forbidden: forbidden.strings()}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Resolve substitutes every token whose key is present in values with that
// value, in one pass: values are emitted verbatim and never re-scanned. A
// token whose key is absent from values is kept verbatim (Keep) or removed
// (Blank). `\{{` renders as `{{`; literal text and invalid tokens are emitted
// unchanged. With no values and Keep, the result equals
// strings.ReplaceAll(template, `\{{`, `{{`).
func Resolve(template string, values map[string]string, onMissing OnMissing) string {
	p := scan(template, 0)
	if p.kind == pieceNone {
		return template
	}
	var b strings.Builder
	b.Grow(len(template) + len(template)/2)
	i := 0
	for {
		b.WriteString(template[i:p.start])
		switch p.kind {
		case pieceNone:
			return b.String()
		case pieceToken:
			if v, ok := values[template[p.ks:p.ke]]; ok {
				b.WriteString(v)
			} else if onMissing != Blank {
				b.WriteString(template[p.start:p.end])
			}
		case pieceEscape:
			b.WriteString("{{")
		case pieceInvalid:
			b.WriteString(template[p.start:p.end])
		}
		i = p.end
		p = scan(template, i)
	}
}
