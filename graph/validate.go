package graph

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode"
)

// Options extends validation with checks graph cannot make itself because
// they need another package's knowledge.
type Options struct {
	// Templates, when set, checks every mapping template (for example that
	// each {{ variable }} is known: UNKNOWN_VARIABLE) and reports the scopes
	// the template needs, which become the node's required permissions.
	Templates TemplateChecker
	// Compiler, when set, supplies the cel/v1 environment and remembers
	// which gate expressions and schemas were already checked, so a
	// long-lived process re-validating known content skips that work. Nil
	// uses a fresh Compiler (no cache) for the call. Results never depend on
	// it.
	Compiler *Compiler
	// HistoryBudget is the Temporal cluster's per-execution limits a
	// revision must fit (HISTORY_LIMIT_EXCEEDED) and dry-run reports
	// against. Nil is DefaultHistoryBudget, the dev server's and Temporal's
	// defaults; a cluster configured lower must say so here.
	HistoryBudget *HistoryBudget
}

// historyBudget is opts.HistoryBudget or the default.
func (o Options) historyBudget() HistoryBudget {
	if o.HistoryBudget != nil {
		return *o.HistoryBudget
	}
	return DefaultHistoryBudget
}

// TemplateChecker is implemented by the variables package. graph stays free
// of the variable registry; it only calls this hook.
type TemplateChecker interface {
	// CheckTemplate is given a mapping template and its bindings (binding
	// key → pointer). Each returned Issue's Path is relative to the mapping
	// entry (e.g. "/bindings/item.id"); an empty Path means the template
	// itself. Scopes are the permissions the template's variables need.
	CheckTemplate(template string, bindings map[string]string) (scopes []string, issues []Issue)
}

// identPattern is the syntax of node ids and port names. Ids never contain a
// dot, so an edge endpoint "node.port" splits unambiguously; ports are safe
// first tokens of mapping pointers and merge output keys.
const identPattern = `^[a-z][a-zA-Z0-9_-]{0,63}$`

// validIdent matches identPattern without a regexp: it runs for every node
// and port of every validation.
func validIdent(s string) bool {
	if len(s) == 0 || len(s) > 64 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// Validate returns every issue of doc against the dependency snapshot cat
// (nil resolves nothing). It never stops at the first issue; an empty result
// means Compile will succeed. Issues come in a deterministic order.
func Validate(doc *Document, cat Catalog) []Issue {
	return ValidateWith(doc, cat, Options{})
}

// ValidateWith is Validate with extension hooks.
func ValidateWith(doc *Document, cat Catalog, opts Options) []Issue {
	return analyze(doc, cat, opts).issues
}

// analysis is one validation pass and what it learned; Compile and DryRun
// reuse it instead of resolving the graph twice.
type analysis struct {
	doc    *Document
	cat    Catalog
	opts   Options
	issues []Issue

	// index maps a node id to its first occurrence in doc.Nodes.
	index map[string]int
	// unique marks the first occurrence of each id; graph checks ignore the
	// duplicates, which are reported once as DUPLICATE_NODE.
	unique []bool
	// edges are the edges whose both endpoints resolved to declared ports.
	edges []resolvedEdge
	// incoming counts edges into each input port.
	incoming map[portKey]int

	actions   map[ActionRef]ActionContract
	agents    map[AgentRef]AgentContract
	nodePerms map[string][]string

	// gates checks each distinct gate expression once, partly in parallel.
	gates *gateChecks
	// compiler is opts.Compiler, or a fresh one built on first use.
	compiler *Compiler

	// order is the compile order, or nil when the graph has a cycle.
	order []string
}

// portKey names one port of the node at index node.
type portKey struct {
	node int
	port string
}

type resolvedEdge struct {
	index            int // position in doc.Edges
	from, to         int // node indexes
	fromPort, toPort string
}

func (a *analysis) add(code, path, format string, args ...any) {
	a.issues = append(a.issues, Issue{Code: code, Path: path, Message: fmt.Sprintf(format, args...)})
}

func analyze(doc *Document, cat Catalog, opts Options) *analysis {
	if cat == nil {
		cat = emptyCatalog{}
	}
	a := &analysis{doc: doc, cat: cat, opts: opts, issues: []Issue{},
		actions: map[ActionRef]ActionContract{}, agents: map[AgentRef]AgentContract{},
		nodePerms: map[string][]string{}}
	if doc == nil {
		a.add(CodeInvalidDocument, "", "document is missing")
		return a
	}
	if doc.SchemaVersion != SchemaVersion {
		a.add(CodeInvalidDocument, "/schemaVersion", "schemaVersion must be %d", SchemaVersion)
	}
	a.gates = newGateChecks(doc, a.celCompiler)
	defer a.gates.close()
	a.checkSizes()
	a.checkSchemas()
	a.checkToolsets()
	a.indexNodes()
	for i := range doc.Nodes {
		a.checkNode(i)
	}
	a.resolveEdges()
	a.checkWiring()
	a.checkGraph()
	a.checkHistory()
	return a
}

// celCompiler returns the Compiler of this analysis, building an uncached one
// on first use when Options has none (most documents without gates then never
// build a CEL environment).
func (a *analysis) celCompiler() *Compiler {
	if a.compiler == nil {
		a.compiler = a.opts.Compiler
		if a.compiler == nil {
			a.compiler = newUncachedCompiler()
		}
	}
	return a.compiler
}

// schemaProblem is why raw does not compile as a JSON Schema, or "".
func (a *analysis) schemaProblem(raw json.RawMessage) string {
	if a.opts.Compiler != nil {
		return a.opts.Compiler.schemaProblem(raw)
	}
	if _, err := CompileSchema(raw); err != nil {
		return err.Error()
	}
	return ""
}

func (a *analysis) checkSizes() {
	l := DefaultLimits
	if n := len(a.doc.Nodes); n > l.MaxNodes {
		a.add(CodeLimitExceeded, "/nodes", "%d nodes; the limit is %d", n, l.MaxNodes)
	}
	if n := len(a.doc.Edges); n > l.MaxEdges {
		a.add(CodeLimitExceeded, "/edges", "%d edges; the limit is %d", n, l.MaxEdges)
	}
	if n := len(a.doc.Schemas); n > l.MaxSchemas {
		a.add(CodeLimitExceeded, "/schemas", "%d schemas; the limit is %d", n, l.MaxSchemas)
	}
}

func (a *analysis) checkSchemas() {
	for _, name := range slices.Sorted(maps.Keys(a.doc.Schemas)) {
		path := Pointer("schemas", name)
		switch {
		case name == AnySchema:
			a.add(CodeInvalidSchema, path, "%q is reserved for the schema that accepts every value", AnySchema)
			continue
		case !schemaNamePattern.MatchString(name):
			a.add(CodeInvalidSchema, path, "schema name must match %s", schemaNamePattern)
			continue
		}
		raw := a.doc.Schemas[name]
		if !isJSONObject(raw) {
			a.add(CodeInvalidSchema, path, "schema must be a JSON Schema object")
			continue
		}
		if msg := a.schemaProblem(raw); msg != "" {
			a.add(CodeInvalidSchema, path, "schema does not compile: %s", msg)
		}
	}
}

func (a *analysis) checkToolsets() {
	for _, name := range slices.Sorted(maps.Keys(a.doc.Toolsets)) {
		path := Pointer("toolsets", name)
		if msg := toolsetNameProblem(name); msg != "" {
			a.add(CodeInvalidToolsPath, path, "toolset name %s", msg)
		}
		ts := a.doc.Toolsets[name]
		if strings.TrimSpace(ts.Skill) == "" {
			a.add(CodeInvalidToolsPath, path+"/skill", "toolset skill text must not be empty")
		}
		if msg := ToolsetSummaryProblem(ts.Summary); msg != "" {
			a.add(CodeInvalidToolsetSummary, path+"/summary", "toolset %q: summary %s", name, msg)
		}
		for j, t := range ts.Tools {
			tp := fmt.Sprintf("%s/tools/%d", path, j)
			ref, err := ParseActionRef(t)
			if err != nil {
				a.add(CodeInvalidToolsPath, tp, "%v", err)
				continue
			}
			a.resolveAction(ref, tp)
		}
		a.checkApprovalPolicies(path, ts)
	}
	if a.doc.Tools != "" {
		if _, ok := a.doc.Toolsets[a.doc.Tools]; !ok {
			a.add(CodeInvalidToolsPath, "/tools", "tools names toolset %q, which is not in toolsets", a.doc.Tools)
		}
	}
}

// checkApprovalPolicies: each policy names a tool the toolset lists and
// says "required"; approvalTimeoutMs is within the approval range.
func (a *analysis) checkApprovalPolicies(path string, ts Toolset) {
	for _, tool := range slices.Sorted(maps.Keys(ts.Approval)) {
		pp := path + "/approval/" + EscapePointerToken(tool)
		switch {
		case !slices.Contains(ts.Tools, tool):
			a.add(CodeInvalidApprovalPolicy, pp, "approval policy names %q, which the toolset's tools do not list", tool)
		case ts.Approval[tool] != ApprovalRequired:
			a.add(CodeInvalidApprovalPolicy, pp, "approval policy %q is not supported; the only policy is %q", ts.Approval[tool], ApprovalRequired)
		}
	}
	l := DefaultLimits
	if ms := ts.ApprovalTimeoutMs; ms != 0 && (ms < l.MinApprovalTimeoutMs || ms > l.MaxApprovalTimeoutMs) {
		a.add(CodeLimitExceeded, path+"/approvalTimeoutMs", "approvalTimeoutMs %d is outside %d–%d (30 days)",
			ms, l.MinApprovalTimeoutMs, l.MaxApprovalTimeoutMs)
	}
}

// toolsetNameProblem returns why name cannot name a toolset, or "". Names come
// from folder paths captured by the CLI; the server never reads a path, so
// anything that still looks like one (a URL, control characters) is refused.
func toolsetNameProblem(name string) string {
	switch {
	case strings.TrimSpace(name) == "":
		return "must not be empty"
	case len(name) > 256:
		return "is longer than 256 bytes"
	case strings.IndexFunc(name, unicode.IsControl) >= 0:
		return "must not contain control characters"
	case strings.Contains(name, "://"):
		return "must not be a URL"
	}
	return ""
}

func (a *analysis) indexNodes() {
	a.index = make(map[string]int, len(a.doc.Nodes))
	a.unique = make([]bool, len(a.doc.Nodes))
	a.incoming = make(map[portKey]int, len(a.doc.Edges))
	for i, n := range a.doc.Nodes {
		if !validIdent(n.ID) {
			a.add(CodeInvalidNode, nodePath(i, "id"), "node id %q must match %s", n.ID, identPattern)
		}
		if first, dup := a.index[n.ID]; dup {
			a.add(CodeDuplicateNode, nodePath(i, "id"), "node id %q is already used by /nodes/%d", n.ID, first)
			continue
		}
		a.index[n.ID] = i
		a.unique[i] = true
	}
}

// resolveAction looks an action up, records it for pinning, and reports a
// missing contract or a refused risk at path.
func (a *analysis) resolveAction(ref ActionRef, path string) (ActionContract, bool) {
	c, ok := a.cat.Action(ref.ID, ref.Version)
	if !ok {
		a.add(CodeMissingDependency, path, "action %s is not in the catalog", ref)
		return ActionContract{}, false
	}
	if c.ID != ref.ID || c.Version != ref.Version {
		a.add(CodeMissingDependency, path, "catalog answered %s@%d for action %s", c.ID, c.Version, ref)
		return ActionContract{}, false
	}
	switch c.Risk {
	case RiskRead, RiskWorkspaceWrite:
	case RiskExternal, RiskDestructive:
		a.add(CodeUnsupportedActionRisk, path, "action %s has risk %q; only read and workspace-write actions can be published", ref, c.Risk)
		return ActionContract{}, false
	default:
		a.add(CodeUnsupportedActionRisk, path, "action %s has unknown risk %q", ref, c.Risk)
		return ActionContract{}, false
	}
	a.actions[ref] = c
	return c, true
}

// resolveAgent looks an agent revision up, records it for pinning, and
// reports a missing or archived revision at path.
func (a *analysis) resolveAgent(ref AgentRef, path string) (AgentContract, bool) {
	c, ok := a.cat.Agent(ref.Key, ref.Revision)
	switch {
	case !ok:
		a.add(CodeMissingDependency, path, "agent %s is not in the catalog", ref)
		return AgentContract{}, false
	case c.Key != ref.Key || c.Revision != ref.Revision:
		a.add(CodeMissingDependency, path, "catalog answered %s@%d for agent %s", c.Key, c.Revision, ref)
		return AgentContract{}, false
	case c.Archived:
		a.add(CodeMissingDependency, path, "agent %s is archived", ref)
		return AgentContract{}, false
	}
	c.Skills = a.resolveAgentSkills(c, path)
	a.agents[ref] = c
	return c, true
}

// resolveAgentSkills pins the tenant skill revisions an agent revision
// lists (their content hashes go into the checksum) and reports, at the
// agent reference's path, one that is not stored or is archived
// (MISSING_DEPENDENCY). Published revisions keep the skills they pinned.
func (a *analysis) resolveAgentSkills(c AgentContract, path string) []PinnedSkill {
	if len(c.Skills) == 0 {
		return nil
	}
	agent := AgentRef{Key: c.Key, Revision: c.Revision}
	pinned := make([]PinnedSkill, 0, len(c.Skills))
	for _, s := range c.Skills {
		ref := SkillRef{Key: s.Key, Revision: s.Revision}
		sc, ok := a.cat.Skill(s.Key, s.Revision)
		switch {
		case !ok || sc.Key != s.Key || sc.Revision != s.Revision:
			a.add(CodeMissingDependency, path, "agent %s lists skill %s, which is not stored", agent, ref)
		case sc.Archived:
			a.add(CodeMissingDependency, path, "agent %s lists skill %s, which is archived", agent, ref)
		}
		pinned = append(pinned, PinnedSkill{Key: s.Key, Revision: s.Revision, Hash: sc.Hash})
	}
	return pinned
}

// addPerms records permissions a node needs, sorted and distinct.
func (a *analysis) addPerms(id string, perms []string) {
	if len(perms) == 0 {
		if _, ok := a.nodePerms[id]; !ok {
			a.nodePerms[id] = []string{}
		}
		return
	}
	p := append(a.nodePerms[id], perms...)
	slices.Sort(p)
	a.nodePerms[id] = slices.Compact(p)
}
