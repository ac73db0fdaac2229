// Package toolsets captures toolset folders for the CLI (SPEC §9). A graph
// document written by an author names folders in `tools:` (a workflow-wide
// default at the top, an override on an agent node); Capture resolves each
// path relative to the file that declares it, checks it, reads the folder's
// toolset.yaml (the actionId@version list) and SKILL.md (the pinned skill
// text), and rewrites the document so it carries the content in its
// `toolsets` map and refers to it by name. The server never reads a client
// path; it only sees names.
//
// Reading a folder never executes anything: the two files are read as
// bounded regular files and parsed as data.
package toolsets

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/graphyaml"
)

// The two files of a toolset folder.
const (
	ManifestFile = "toolset.yaml"
	SkillFile    = "SKILL.md"
)

// Size bounds of the two files; the whole document is also bounded by the
// graph document limit.
const (
	MaxManifestBytes = 64 << 10
	MaxSkillBytes    = 64 << 10
)

// Error is why a path or a folder cannot be used. Code is
// graph.CodeInvalidToolsPath, or for toolset.yaml's summary
// graph.CodeMissingToolsetSummary / graph.CodeInvalidToolsetSummary.
type Error struct {
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func invalid(format string, args ...any) *Error {
	return &Error{Code: graph.CodeInvalidToolsPath, Message: fmt.Sprintf(format, args...)}
}

// schemePattern is an RFC 3986 URI scheme followed by ':'. Any such prefix
// is a URL specifier (http:, file:, data:, ...). A Windows drive letter
// ("C:\tools") has the same form and is refused too: weft's CLI resolves
// POSIX paths; write ./C:/... if a folder is really named like that.
var schemePattern = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.-]*:`)

// CheckPath reports why p cannot name a toolset folder, or nil. Refused:
// an empty (or blank) path, control characters anywhere, and URL
// specifiers (any scheme: prefix, including file:, and a leading // or \\,
// a network-path reference). Relative paths with .. and absolute paths are
// allowed: the CLI reads the author's own files.
func CheckPath(p string) error {
	switch {
	case strings.TrimSpace(p) == "":
		return invalid("a tools path must not be empty")
	case strings.IndexFunc(p, unicode.IsControl) >= 0:
		return invalid("tools path %q contains a control character", p)
	case !utf8.ValidString(p):
		return invalid("tools path %q is not valid UTF-8", p)
	case schemePattern.MatchString(p):
		return invalid("tools path %q is a URL specifier; name a local folder (relative to the workflow file, or absolute)", p)
	case strings.HasPrefix(p, "//") || strings.HasPrefix(p, `\\`):
		return invalid("tools path %q is a network-path reference; name a local folder", p)
	}
	return nil
}

// Resolve returns the folder path p names, relative to baseDir (the
// directory of the file that declares it) unless absolute, cleaned.
func Resolve(baseDir, p string) (string, error) {
	if err := CheckPath(p); err != nil {
		return "", err
	}
	if filepath.IsAbs(p) {
		return filepath.Clean(p), nil
	}
	return filepath.Join(baseDir, p), nil
}

// Load reads a toolset folder: toolset.yaml holding
//
//	summary: Look items up and echo them back.
//	approvalTimeoutMs: 3600000          # optional
//	tools:
//	  - core.echo@1
//	  - tool: workspace.notes.write@1
//	    approval: required
//
// (no other keys: summary one line of at most 600 characters, shown to the
// agent with the tool list; tools each actionId@version, or a mapping of
// tool and approval (the only policy is required: the agent's call waits
// for a person's decision), no duplicates, an empty list offering no
// tools; approvalTimeoutMs how long such a call waits, 1 s to 30 days,
// a day when absent) and a SKILL.md that is not blank. Neither file is
// executed or interpreted beyond that. Which actions exist is decided by the
// server's catalog when the document is saved and published.
func Load(dir string) (graph.Toolset, error) {
	st, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return graph.Toolset{}, invalid("toolset folder %s does not exist", dir)
	case err != nil:
		return graph.Toolset{}, invalid("toolset folder %s: %v", dir, err)
	case !st.IsDir():
		return graph.Toolset{}, invalid("%s is not a folder", dir)
	}
	manifest, err := readBounded(filepath.Join(dir, ManifestFile), MaxManifestBytes)
	if err != nil {
		return graph.Toolset{}, err
	}
	m, err := parseManifest(filepath.Join(dir, ManifestFile), manifest)
	if err != nil {
		return graph.Toolset{}, err
	}
	skill, err := readBounded(filepath.Join(dir, SkillFile), MaxSkillBytes)
	if err != nil {
		return graph.Toolset{}, err
	}
	skillPath := filepath.Join(dir, SkillFile)
	if !utf8.Valid(skill) {
		return graph.Toolset{}, invalid("%s is not valid UTF-8", skillPath)
	}
	if strings.TrimSpace(string(skill)) == "" {
		return graph.Toolset{}, invalid("%s is empty; a toolset needs its skill text", skillPath)
	}
	return graph.Toolset{Tools: m.tools, Skill: string(skill), Summary: m.summary, Approval: m.approval,
		ApprovalTimeoutMs: m.approvalTimeoutMs}, nil
}

// readBounded reads a regular file of at most limit bytes. A FIFO, device
// or folder is refused without being opened for reading.
func readBounded(path string, limit int64) ([]byte, error) {
	st, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		return nil, invalid("%s is missing", path)
	case err != nil:
		return nil, invalid("%s: %v", path, err)
	case !st.Mode().IsRegular():
		return nil, invalid("%s is not a regular file", path)
	case st.Size() > limit:
		return nil, invalid("%s is %d bytes; the limit is %d", path, st.Size(), limit)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, invalid("%s: %v", path, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, invalid("%s: %v", path, err)
	}
	if int64(len(data)) > limit {
		return nil, invalid("%s is larger than %d bytes", path, limit)
	}
	return data, nil
}

// manifest is what toolset.yaml says.
type manifest struct {
	tools             []string
	summary           string
	approval          map[string]string
	approvalTimeoutMs int
}

// parseManifest strictly reads toolset.yaml: its tools (with their
// approval policies), its summary and its approval timeout.
func parseManifest(path string, data []byte) (manifest, error) {
	var m manifest
	raw, pos, err := graphyaml.YAMLToJSON(data)
	if err != nil {
		var de *graph.DecodeError
		if errors.As(err, &de) && de.Line > 0 {
			return m, invalid("%s:%d:%d: %s", path, de.Line, de.Column, de.Message)
		}
		return m, invalid("%s: %v", path, err)
	}
	at := func(ptr string) string {
		if p, ok := pos.Lookup(ptr); ok && p.Line > 0 {
			return fmt.Sprintf("%s:%d:%d", path, p.Line, p.Column)
		}
		return path
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return m, invalid("%s: must be a mapping with a summary and a tools list", at(""))
	}
	for k := range top {
		if k != "tools" && k != "summary" && k != "approvalTimeoutMs" {
			return m, invalid("%s: unknown key %q; toolset.yaml holds only summary, tools and approvalTimeoutMs", at("/"+k), k)
		}
	}
	if m.summary, err = parseSummary(at, top["summary"]); err != nil {
		return m, err
	}
	if v, ok := top["approvalTimeoutMs"]; ok {
		l := graph.DefaultLimits
		if json.Unmarshal(v, &m.approvalTimeoutMs) != nil || m.approvalTimeoutMs < l.MinApprovalTimeoutMs || m.approvalTimeoutMs > l.MaxApprovalTimeoutMs {
			return m, invalid("%s: approvalTimeoutMs must be an integer from %d to %d (30 days)", at("/approvalTimeoutMs"),
				l.MinApprovalTimeoutMs, l.MaxApprovalTimeoutMs)
		}
	}
	list, ok := top["tools"]
	if !ok {
		return m, invalid("%s: tools (the actionId@version list) is required", at(""))
	}
	var entries []json.RawMessage
	if json.Unmarshal(list, &entries) != nil || entries == nil {
		return m, invalid("%s: tools must be a list of actionId@version strings", at("/tools"))
	}
	m.tools = make([]string, 0, len(entries))
	for i, e := range entries {
		where := at("/tools/" + strconv.Itoa(i))
		s, policy, err := parseEntry(e)
		if err != nil {
			return m, invalid("%s: %v", where, err)
		}
		if _, err := graph.ParseActionRef(s); err != nil {
			return m, invalid("%s: %v", where, err)
		}
		if slices.Contains(m.tools, s) {
			return m, invalid("%s: %s is listed twice", where, s)
		}
		m.tools = append(m.tools, s)
		if policy != "" {
			if m.approval == nil {
				m.approval = map[string]string{}
			}
			m.approval[s] = policy
		}
	}
	return m, nil
}

// parseEntry reads one tools entry: an actionId@version string, or a
// mapping {tool: actionId@version, approval: required}.
func parseEntry(raw json.RawMessage) (tool, policy string, err error) {
	if json.Unmarshal(raw, &tool) == nil {
		return tool, "", nil
	}
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return "", "", errors.New("tools entry must be an actionId@version string or a mapping {tool, approval}")
	}
	for k := range fields {
		if k != "tool" && k != "approval" {
			return "", "", fmt.Errorf("unknown key %q in a tools entry; an entry holds only tool and approval", k)
		}
	}
	if json.Unmarshal(fields["tool"], &tool) != nil || tool == "" {
		return "", "", errors.New("a tools entry mapping needs tool: actionId@version")
	}
	if v, ok := fields["approval"]; ok {
		if json.Unmarshal(v, &policy) != nil || policy != graph.ApprovalRequired {
			return "", "", fmt.Errorf("approval must be %q", graph.ApprovalRequired)
		}
	}
	return tool, policy, nil
}

// parseSummary reads toolset.yaml's summary: required, one line of at most
// graph.Limits.MaxToolsetSummaryChars characters.
func parseSummary(at func(string) string, raw json.RawMessage) (string, error) {
	if raw == nil {
		return "", &Error{Code: graph.CodeMissingToolsetSummary, Message: fmt.Sprintf(
			"%s: summary is required: one line (at most %d characters) saying what the tools are for, shown to the agent with the tool list",
			at(""), graph.DefaultLimits.MaxToolsetSummaryChars)}
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", &Error{Code: graph.CodeInvalidToolsetSummary, Message: fmt.Sprintf("%s: summary must be a string", at("/summary"))}
	}
	if strings.TrimSpace(s) == "" {
		return "", &Error{Code: graph.CodeMissingToolsetSummary, Message: fmt.Sprintf("%s: summary is empty", at("/summary"))}
	}
	if msg := graph.ToolsetSummaryProblem(s); msg != "" {
		return "", &Error{Code: graph.CodeInvalidToolsetSummary, Message: fmt.Sprintf("%s: summary %s", at("/summary"), msg)}
	}
	return s, nil
}

// Captured is one folder a document selected.
type Captured struct {
	// Name is the toolset name the document now uses.
	Name string
	// Path is the first tools: value that selected the folder, as written;
	// Pointer is where (e.g. /tools, /nodes/3/tools); Dir is the resolved folder.
	Path, Pointer, Dir string
}

// Capture resolves every tools: path of doc (the top-level default and
// agent nodes' overrides) relative to baseDir, loads each distinct folder
// once, adds it to doc.Toolsets and replaces the path with the toolset's
// name. A value naming a toolset doc already holds inline is a name and is
// left alone; anything else is a path. Names are the folders' base names,
// made unique in document order (report, report-2, ...), so the same files
// always produce the same document.
//
// raw is the document's JSON form (for YAML, graphyaml.YAMLDocument.JSON): a
// decoded Document cannot tell an empty tools: "" from an omitted one, and
// an empty path is refused, never read as "no toolset".
//
// It returns every problem as an INVALID_TOOLS_PATH issue at the pointer
// of the offending tools: value; on any issue doc must not be sent.
func Capture(doc *graph.Document, raw json.RawMessage, baseDir string) ([]Captured, []graph.Issue) {
	issues := []graph.Issue{}
	if doc == nil {
		return nil, issues
	}
	issues = append(issues, graph.EmptyToolsIssues(raw)...)
	inline := map[string]bool{}
	for name := range doc.Toolsets {
		inline[name] = true
	}
	byDir := map[string]string{} // resolved dir -> name
	used := map[string]bool{}
	for name := range inline {
		used[name] = true
	}
	var captured []Captured
	take := func(value *string, pointer string) {
		p := *value
		if inline[p] {
			return
		}
		dir, err := Resolve(baseDir, p)
		if err != nil {
			issues = append(issues, issueOf(pointer, err))
			return
		}
		if name, ok := byDir[dir]; ok {
			*value = name
			return
		}
		ts, err := Load(dir)
		if err != nil {
			issues = append(issues, issueOf(pointer, fmt.Errorf("tools %q: %w", p, err)))
			return
		}
		name := uniqueName(filepath.Base(dir), used)
		used[name] = true
		byDir[dir] = name
		if doc.Toolsets == nil {
			doc.Toolsets = map[string]graph.Toolset{}
		}
		doc.Toolsets[name] = ts
		captured = append(captured, Captured{Name: name, Path: p, Pointer: pointer, Dir: dir})
		*value = name
	}
	if doc.Tools != "" {
		take(&doc.Tools, "/tools")
	}
	for i := range doc.Nodes {
		if doc.Nodes[i].Tools != "" {
			take(&doc.Nodes[i].Tools, "/nodes/"+strconv.Itoa(i)+"/tools")
		}
	}
	return captured, issues
}

func issueOf(pointer string, err error) graph.Issue {
	var te *Error
	msg, code := err.Error(), graph.CodeInvalidToolsPath
	if errors.As(err, &te) {
		msg = strings.Replace(msg, te.Error(), te.Message, 1)
		code = te.Code
	}
	return graph.Issue{Code: code, Path: pointer, Message: msg}
}

// uniqueName derives a toolset name from a folder's base name: the name
// itself when free, else name-2, name-3, ...
func uniqueName(base string, used map[string]bool) string {
	if base == "" || base == "." || base == string(filepath.Separator) {
		base = "toolset"
	}
	if !used[base] {
		return base
	}
	for i := 2; ; i++ {
		n := base + "-" + strconv.Itoa(i)
		if !used[n] {
			return n
		}
	}
}
