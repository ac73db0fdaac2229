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
//	tools:
//	  - core.echo@1
//
// (exactly those keys: summary one line of at most 600 characters, shown
// to the agent with the tool list; tools each actionId@version, no
// duplicates, an empty list offering no tools) and a SKILL.md that is not
// blank. Neither file is
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
	tools, summary, err := parseManifest(filepath.Join(dir, ManifestFile), manifest)
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
	return graph.Toolset{Tools: tools, Skill: string(skill), Summary: summary}, nil
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

// parseManifest strictly reads toolset.yaml: its tools and its summary.
func parseManifest(path string, data []byte) ([]string, string, error) {
	raw, pos, err := graph.YAMLToJSON(data)
	if err != nil {
		var de *graph.DecodeError
		if errors.As(err, &de) && de.Line > 0 {
			return nil, "", invalid("%s:%d:%d: %s", path, de.Line, de.Column, de.Message)
		}
		return nil, "", invalid("%s: %v", path, err)
	}
	at := func(ptr string) string {
		if p, ok := pos.Lookup(ptr); ok && p.Line > 0 {
			return fmt.Sprintf("%s:%d:%d", path, p.Line, p.Column)
		}
		return path
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return nil, "", invalid("%s: must be a mapping with a summary and a tools list", at(""))
	}
	for k := range top {
		if k != "tools" && k != "summary" {
			return nil, "", invalid("%s: unknown key %q; toolset.yaml holds only summary and tools", at("/"+k), k)
		}
	}
	summary, err := parseSummary(at, top["summary"])
	if err != nil {
		return nil, "", err
	}
	list, ok := top["tools"]
	if !ok {
		return nil, "", invalid("%s: tools (the actionId@version list) is required", at(""))
	}
	var entries []any
	if json.Unmarshal(list, &entries) != nil || entries == nil {
		return nil, "", invalid("%s: tools must be a list of actionId@version strings", at("/tools"))
	}
	tools := make([]string, 0, len(entries))
	for i, e := range entries {
		where := at("/tools/" + strconv.Itoa(i))
		s, ok := e.(string)
		if !ok {
			return nil, "", invalid("%s: tools entry must be an actionId@version string", where)
		}
		if _, err := graph.ParseActionRef(s); err != nil {
			return nil, "", invalid("%s: %v", where, err)
		}
		if slices.Contains(tools, s) {
			return nil, "", invalid("%s: %s is listed twice", where, s)
		}
		tools = append(tools, s)
	}
	return tools, summary, nil
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
// raw is the document's JSON form (for YAML, graph.YAMLDocument.JSON): a
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
