package graph

import (
	"encoding/json"
	"strings"
	"unicode/utf8"
)

// checkMapping checks how a node builds its call input (SPEC §2 mappings):
// each entry is exactly one of literal, pointer or template; pointers and
// bindings are RFC 6901 and start at one of the node's input ports.
func (a *analysis) checkMapping(i int, n Node) {
	path := nodePath(i, "mapping")
	if !callsSomething(n.Kind) {
		if len(n.Mapping) > 0 {
			a.add(CodeInvalidMapping, path, "only agent, agent-decision and action nodes take a mapping")
		}
		return
	}
	if len(n.Mapping) == 0 {
		if len(n.Inputs) > 1 {
			a.add(CodeInvalidMapping, path, "a node with several input ports needs a mapping to build its call input")
		}
		return
	}
	if c := len(n.Mapping); c > DefaultLimits.MaxMappingEntries {
		a.add(CodeLimitExceeded, path, "%d mapping entries; the limit is %d", c, DefaultLimits.MaxMappingEntries)
	}
	for _, key := range sortedKeys(n.Mapping) {
		a.checkMappingEntry(n, path+"/"+escapeToken(key), key, n.Mapping[key])
	}
}

func (a *analysis) checkMappingEntry(n Node, path, key string, m Mapping) {
	if key == "" {
		a.add(CodeInvalidMapping, path, "mapping keys name call input fields and must not be empty")
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
		a.add(CodeInvalidMapping, path, "a mapping entry is exactly one of literal, pointer or template (found %d)", set)
		return
	}
	if m.Template == nil && m.Bindings != nil {
		a.add(CodeInvalidMapping, path+"/bindings", "only template mappings take bindings")
	}
	switch {
	case len(m.Literal) > 0:
		if !json.Valid(m.Literal) {
			a.add(CodeInvalidMapping, path+"/literal", "literal is not valid JSON")
		}
	case m.Pointer != nil:
		a.checkPortPointer(n, path+"/pointer", *m.Pointer)
	case m.Template != nil:
		a.checkTemplate(n, path, *m.Template, m.Bindings)
	}
}

func (a *analysis) checkTemplate(n Node, path, tmpl string, bindings map[string]string) {
	if c := utf8.RuneCountInString(tmpl); c > DefaultLimits.MaxTemplateChars {
		a.add(CodeLimitExceeded, path+"/template", "template has %d characters; the limit is %d", c, DefaultLimits.MaxTemplateChars)
		return
	}
	for _, k := range sortedKeys(bindings) {
		bp := path + "/bindings/" + escapeToken(k)
		if !bindingKeyPattern.MatchString(k) {
			a.add(CodeInvalidMapping, bp, "binding key %q must be a variable key or binding name (%s)", k, bindingKeyPattern)
		}
		a.checkPortPointer(n, bp, bindings[k])
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
		a.issues = append(a.issues, Issue{Code: is.Code, Path: path + p, Message: is.Message})
	}
	a.addPerms(n.ID, scopes)
}

// checkPortPointer checks a pointer whose first token names an input port of
// n; the rest addresses into that port's value and is resolved at run time.
func (a *analysis) checkPortPointer(n Node, path, p string) {
	toks, err := ParsePointer(p)
	if err != nil {
		a.add(CodeInvalidMapping, path, "pointer %q: %v", p, err)
		return
	}
	if len(toks) == 0 {
		a.add(CodeInvalidMapping, path, "pointer must start with an input port, e.g. \"/in\"")
		return
	}
	if _, ok := n.Inputs[toks[0]]; !ok {
		a.add(CodeInvalidMapping, path, "pointer %q starts at %q, which is not an input port of node %q (input ports: %s)",
			p, toks[0], n.ID, strings.Join(sortedKeys(n.Inputs), ", "))
	}
}
