package graph

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/weftworks/weft/variables"
)

// checkMapping checks how a node builds its call input (SPEC §2 mappings):
// each entry is exactly one of literal, pointer or template; pointers and
// bindings are RFC 6901 and start at one of the node's input ports.
func (a *analysis) checkMapping(i int, n Node) {
	if !callsSomething(n.Kind) {
		if len(n.Mapping) > 0 {
			a.add(CodeInvalidMapping, nodePath(i, "mapping"), "only agent, agent-decision and action nodes take a mapping")
		}
		return
	}
	if len(n.Mapping) == 0 {
		if len(n.Inputs) > 1 {
			a.add(CodeInvalidMapping, nodePath(i, "mapping"), "a node with several input ports needs a mapping to build its call input")
		}
		return
	}
	if c := len(n.Mapping); c > DefaultLimits.MaxMappingEntries {
		a.add(CodeLimitExceeded, nodePath(i, "mapping"), "%d mapping entries; the limit is %d", c, DefaultLimits.MaxMappingEntries)
	}
	for _, key := range slices.Sorted(maps.Keys(n.Mapping)) {
		a.checkMappingEntry(n, mappingPath{i, key}, key, n.Mapping[key])
	}
}

// mappingPath is the JSON pointer of one mapping entry. It is built only
// when an issue is reported: most entries have none.
type mappingPath struct {
	node int
	key  string
}

// at is the pointer of the entry followed by raw tokens.
func (p mappingPath) at(tokens ...string) string {
	return nodePath(p.node, "mapping") + "/" + EscapePointerToken(p.key) + Pointer(tokens...)
}

func (a *analysis) checkMappingEntry(n Node, path mappingPath, key string, m Mapping) {
	if key == "" {
		a.add(CodeInvalidMapping, path.at(), "mapping keys name call input fields and must not be empty")
	}
	set := 0
	if len(m.Literal) > 0 {
		set++
	}
	if m.Pointer != nil {
		set++
	}
	if m.Template != nil {
		set++
	}
	if set != 1 {
		a.add(CodeInvalidMapping, path.at(), "a mapping entry is exactly one of literal, pointer or template (found %d)", set)
		return
	}
	if m.Template == nil && m.Bindings != nil {
		a.add(CodeInvalidMapping, path.at("bindings"), "only template mappings take bindings")
	}
	switch {
	case len(m.Literal) > 0:
		if !json.Valid(m.Literal) {
			a.add(CodeInvalidMapping, path.at("literal"), "literal is not valid JSON")
		}
	case m.Pointer != nil:
		a.checkPortPointer(n, *m.Pointer, path, "pointer")
	case m.Template != nil:
		a.checkTemplate(n, path, *m.Template, m.Bindings)
	}
}

func (a *analysis) checkTemplate(n Node, path mappingPath, tmpl string, bindings map[string]string) {
	if c := utf8.RuneCountInString(tmpl); c > DefaultLimits.MaxTemplateChars {
		a.add(CodeLimitExceeded, path.at("template"), "template has %d characters; the limit is %d", c, DefaultLimits.MaxTemplateChars)
		return
	}
	for _, k := range slices.Sorted(maps.Keys(bindings)) {
		// A binding key is a variable key or a source binding name: one
		// syntax (SPEC §6), which package variables owns.
		if !variables.IsKey(k) {
			a.add(CodeInvalidMapping, path.at("bindings", k), "binding key %q must be a variable key or binding name (%s)", k, variables.KeyPattern)
		}
		a.checkPortPointer(n, bindings[k], path, "bindings", k)
	}
	if a.opts.Templates == nil {
		return
	}
	scopes, issues := a.opts.Templates.CheckTemplate(tmpl, bindings)
	for _, is := range issues {
		p := is.Path
		if p == "" {
			p = "/template"
		}
		a.issues = append(a.issues, Issue{Code: is.Code, Path: path.at() + p, Message: is.Message})
	}
	a.addPerms(n.ID, scopes)
}

// checkPortPointer checks a pointer whose first token names an input port of
// n; the rest addresses into that port's value and is resolved at run time.
// Issues are reported at path.at(sub...).
func (a *analysis) checkPortPointer(n Node, p string, path mappingPath, sub ...string) {
	first, ok, err := firstPointerToken(p)
	if err != nil {
		a.add(CodeInvalidMapping, path.at(sub...), "pointer %q: %v", p, err)
		return
	}
	if !ok {
		a.add(CodeInvalidMapping, path.at(sub...), "pointer must start with an input port, e.g. \"/in\"")
		return
	}
	if _, ok := n.Inputs[first]; !ok {
		a.add(CodeInvalidMapping, path.at(sub...), "pointer %q starts at %q, which is not an input port of node %q (input ports: %s)",
			p, first, n.ID, strings.Join(slices.Sorted(maps.Keys(n.Inputs)), ", "))
	}
}

// firstPointerToken is ParsePointer(p)'s first token without building the
// others: ok is false for "" (no tokens), err is ParsePointer's error.
func firstPointerToken(p string) (first string, ok bool, err error) {
	if !strings.Contains(p, "~") {
		if p == "" {
			return "", false, nil
		}
		if p[0] != '/' {
			return "", false, errPointerSyntax
		}
		first, _, _ = strings.Cut(p[1:], "/")
		return first, true, nil
	}
	toks, err := ParsePointer(p)
	if err != nil || len(toks) == 0 {
		return "", false, err
	}
	return toks[0], true, nil
}
