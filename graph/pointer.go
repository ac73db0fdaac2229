package graph

import (
	"errors"
	"strconv"
	"strings"
)

// This file holds RFC 6901 JSON pointer helpers: issue paths are pointers into
// the document, and mapping pointers address a node's input port values.

// EscapePointerToken escapes one reference token (RFC 6901 §3: "~" then
// "/"). Issue paths, decode errors, schema errors and fixture problems all
// build their pointers with it or with Pointer.
func EscapePointerToken(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

// Pointer builds an RFC 6901 JSON pointer from raw (unescaped) tokens; no
// tokens is "", the whole value.
func Pointer(tokens ...string) string {
	var b strings.Builder
	for _, t := range tokens {
		b.WriteByte('/')
		b.WriteString(EscapePointerToken(t))
	}
	return b.String()
}

// nodePath is the pointer to node i, followed by raw tokens.
func nodePath(i int, tokens ...string) string {
	return "/nodes/" + strconv.Itoa(i) + Pointer(tokens...)
}

// edgePath is the pointer to edge i, followed by raw tokens.
func edgePath(i int, tokens ...string) string {
	return "/edges/" + strconv.Itoa(i) + Pointer(tokens...)
}

// errPointerSyntax reports a malformed RFC 6901 pointer.
var errPointerSyntax = errors.New("a JSON pointer is empty or a sequence of /token, where ~ is only followed by 0 or 1")

// ParsePointer splits an RFC 6901 JSON pointer into unescaped reference
// tokens. "" is the whole value and yields no tokens. Activities resolve
// mapping pointers with it so validation and run time agree on the syntax.
func ParsePointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, errPointerSyntax
	}
	parts := strings.Split(p[1:], "/")
	for i, t := range parts {
		if !strings.Contains(t, "~") {
			continue
		}
		var b strings.Builder
		for j := 0; j < len(t); j++ {
			if t[j] != '~' {
				b.WriteByte(t[j])
				continue
			}
			if j+1 >= len(t) || (t[j+1] != '0' && t[j+1] != '1') {
				return nil, errPointerSyntax
			}
			if t[j+1] == '0' {
				b.WriteByte('~')
			} else {
				b.WriteByte('/')
			}
			j++
		}
		parts[i] = b.String()
	}
	return parts, nil
}

// SplitEndpoint splits an edge endpoint "node.port" at its first dot. Node ids
// cannot contain a dot, so the split is unambiguous.
func SplitEndpoint(s string) (node, port string, ok bool) {
	node, port, ok = strings.Cut(s, ".")
	if !ok || node == "" || port == "" {
		return "", "", false
	}
	return node, port, true
}

// ResolvePointer applies RFC 6901 tokens to a JSON-decoded value (objects as
// map[string]any, arrays as []any). Array tokens are decimal indexes without
// leading zeros; "-" and out-of-range indexes resolve to nothing. Activities
// use it for mapping pointers (after the port token) so a pointer means the
// same thing everywhere; false is MAPPING_UNRESOLVED.
func ResolvePointer(v any, tokens []string) (any, bool) {
	for _, t := range tokens {
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			if t == "" || (len(t) > 1 && t[0] == '0') {
				return nil, false
			}
			i, err := strconv.Atoi(t)
			if err != nil || i < 0 || i >= len(c) || t[0] == '+' {
				return nil, false
			}
			v = c[i]
		default:
			return nil, false
		}
	}
	return v, true
}
