package graph

import (
	"encoding/json"
	"strconv"
	"strings"
)

// This file holds the checks a document's toolsets get when it reaches the
// server (SPEC §9). The CLI captures toolset folders into the document's
// toolsets map, so `tools` values are names; a value that names no toolset
// is a path nobody captured (the server never reads a client path) and the
// document is refused when it is saved, not merely reported at dry-run.

// ToolsetIssues returns the issues of doc's toolsets and tools selections
// against cat: every issue Validate reports at /tools, under /toolsets, or at
// a node's tools (INVALID_TOOLS_PATH for a name that selects nothing, a
// malformed name, a blank skill, an entry that is not actionId@version, or a
// tools selection on a node that is not an agent; MISSING_DEPENDENCY for an
// action the catalog does not hold; UNSUPPORTED_ACTION_RISK for an external
// or destructive one). Empty when they are all usable.
func ToolsetIssues(doc *Document, cat Catalog) []Issue {
	out := []Issue{}
	if doc == nil || !selectsToolsets(doc) {
		return out
	}
	for _, is := range Validate(doc, cat) {
		if isToolsPath(is.Path) {
			out = append(out, is)
		}
	}
	return out
}

func selectsToolsets(doc *Document) bool {
	if doc.Tools != "" || len(doc.Toolsets) > 0 {
		return true
	}
	for _, n := range doc.Nodes {
		if n.Tools != "" {
			return true
		}
	}
	return false
}

// isToolsPath reports whether pointer is /tools, under /toolsets, or
// /nodes/<i>/tools.
func isToolsPath(pointer string) bool {
	if pointer == "/tools" || pointer == "/toolsets" || strings.HasPrefix(pointer, "/toolsets/") {
		return true
	}
	rest, ok := strings.CutPrefix(pointer, "/nodes/")
	if !ok {
		return false
	}
	i, field, ok := strings.Cut(rest, "/")
	if _, err := strconv.Atoi(i); err != nil || !ok {
		return false
	}
	return field == "tools"
}

// EmptyToolsIssues returns an INVALID_TOOLS_PATH issue for every tools value
// that is present but empty in a document's JSON form: at the top
// level and on nodes. A decoded Document cannot tell `"tools": ""` from an
// omitted selection, and an empty path must be refused rather than read as
// "no toolset". raw must already have passed Decode (or be the JSON form of
// ParseYAML); anything else yields no issue.
func EmptyToolsIssues(raw json.RawMessage) []Issue {
	var shape struct {
		Tools *string `json:"tools"`
		Nodes []struct {
			Tools *string `json:"tools"`
		} `json:"nodes"`
	}
	out := []Issue{}
	if json.Unmarshal(raw, &shape) != nil {
		return out
	}
	// A blank but non-empty value is a name that selects nothing, which
	// Validate reports itself.
	blank := func(s *string) bool { return s != nil && *s == "" }
	if blank(shape.Tools) {
		out = append(out, Issue{Code: CodeInvalidToolsPath, Path: "/tools", Message: "tools must name a toolset; it is empty"})
	}
	for i, n := range shape.Nodes {
		if blank(n.Tools) {
			out = append(out, Issue{Code: CodeInvalidToolsPath, Path: nodePath(i, "tools"), Message: "tools must name a toolset; it is empty"})
		}
	}
	return out
}

// EffectiveToolset returns the toolset an agent or agent-decision node is
// offered: its own tools selection when set, else the document's default;
// ok is false when neither selects one (then the toolset term does not
// restrict the agent's tools: SPEC §7) or the name is not in toolsets
// (which validation refuses).
func EffectiveToolset(doc *Document, n Node) (name string, ts Toolset, ok bool) {
	if doc == nil || !isAgentKind(n.Kind) {
		return "", Toolset{}, false
	}
	name = doc.Tools
	if n.Tools != "" {
		name = n.Tools
	}
	if name == "" {
		return "", Toolset{}, false
	}
	ts, ok = doc.Toolsets[name]
	return name, ts, ok
}
