package graph

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
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
// graphyaml.ParseYAML); anything else yields no issue.
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

// ToolsetSummaryProblem returns why s cannot be a toolset summary, or ""
// (an empty summary is not a problem here: see ToolsetWarnings). A summary
// is one line (no line break), at most Limits.MaxToolsetSummaryChars
// characters, without other control characters, and not blank once
// present.
func ToolsetSummaryProblem(s string) string {
	if s == "" {
		return ""
	}
	switch n := utf8.RuneCountInString(s); {
	case strings.TrimSpace(s) == "":
		return "must not be blank"
	case strings.ContainsAny(s, "\r\n\u2028\u2029\u0085"):
		return "must be one line"
	case n > DefaultLimits.MaxToolsetSummaryChars:
		return fmt.Sprintf("has %d characters; the limit is %d", n, DefaultLimits.MaxToolsetSummaryChars)
	case strings.IndexFunc(s, unicode.IsControl) >= 0:
		return "must not contain control characters"
	}
	return ""
}

// ToolsetWarnings returns a MISSING_TOOLSET_SUMMARY warning for every
// toolset of doc without a summary, in name order. Warnings never refuse
// anything: drafts and revisions saved before summaries existed keep
// working (dry-run, publication and `weft validate` show the warning and
// ask for a summary). It never returns nil.
func ToolsetWarnings(doc *Document) []Issue {
	out := []Issue{}
	if doc == nil {
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Toolsets)) {
		if doc.Toolsets[name].Summary == "" {
			out = append(out, Issue{Code: CodeMissingToolsetSummary, Path: Pointer("toolsets", name, "summary"),
				Message: fmt.Sprintf("toolset %q has no summary: add one line (at most %d characters) saying what its tools are for; it is shown to the agent with the tool list",
					name, DefaultLimits.MaxToolsetSummaryChars)})
		}
	}
	return out
}

// RequireToolsetSummaries returns a MISSING_TOOLSET_SUMMARY issue for every
// toolset of doc without a summary that is new: not among the toolsets
// without a summary of previous (the draft being replaced; nil when there
// is none). A draft save refuses them, so new toolsets always carry a
// summary while a draft saved before summaries existed can still be edited.
func RequireToolsetSummaries(doc, previous *Document) []Issue {
	out := []Issue{}
	if doc == nil {
		return out
	}
	for _, name := range slices.Sorted(maps.Keys(doc.Toolsets)) {
		if doc.Toolsets[name].Summary != "" {
			continue
		}
		if previous != nil {
			if old, ok := previous.Toolsets[name]; ok && old.Summary == "" {
				continue
			}
		}
		out = append(out, Issue{Code: CodeMissingToolsetSummary, Path: Pointer("toolsets", name, "summary"),
			Message: fmt.Sprintf("toolset %q needs a summary: one line (at most %d characters) saying what its tools are for",
				name, DefaultLimits.MaxToolsetSummaryChars)})
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
