package toolsets

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/graphyaml"
)

// sum is a valid toolset.yaml summary line.
const sum = "summary: Test tools.\n"

// folder writes a toolset folder under root and returns its path.
func folder(t *testing.T, root, rel, manifest, skill string) string {
	t.Helper()
	dir := filepath.Join(root, rel)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	if manifest != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, ManifestFile), []byte(manifest), 0o644))
	}
	if skill != "" {
		require.NoError(t, os.WriteFile(filepath.Join(dir, SkillFile), []byte(skill), 0o644))
	}
	return dir
}

func TestCheckPathRules(t *testing.T) {
	refused := map[string]string{
		"empty":                "",
		"blank":                "  \t ",
		"NUL":                  "tools/\x00x",
		"newline":              "tools/x\n",
		"tab":                  "tools\tx",
		"DEL":                  "tools/\x7f",
		"C1 control":           "tools/\u0085x",
		"http URL":             "http://example.com/tools",
		"https URL":            "https://example.com/tools",
		"file URL":             "file:///etc/tools",
		"file without slashes": "file:tools/report",
		"data URL":             "data:text/plain,x",
		"javascript":           "javascript:alert(1)",
		"custom scheme":        "s3+tools.v2:bucket/x",
		"uppercase scheme":     "FILE:/x",
		"drive letter":         `C:\tools`,
		"bare scheme":          "tools:",
		"network path":         "//host/share/tools",
		"UNC path":             `\\host\share`,
	}
	for name, p := range refused {
		t.Run(name, func(t *testing.T) {
			err := CheckPath(p)
			var te *Error
			require.ErrorAs(t, err, &te)
			require.Equal(t, graph.CodeInvalidToolsPath, te.Code)
		})
	}
	for _, p := range []string{
		"./tools/report", "tools/report", "../shared/tools", "../../x", "/abs/tools", "/", ".",
		"./a:b", "tools/a:b", "~/tools", "a b", "日本/ツール", "-tools", "1tools:", "+x:y",
	} {
		require.NoError(t, CheckPath(p), p)
	}
}

func TestResolveIsRelativeToTheDeclaringFile(t *testing.T) {
	base := "/work/project/flows"
	for p, want := range map[string]string{
		"./tools/report":   "/work/project/flows/tools/report",
		"tools/report/":    "/work/project/flows/tools/report",
		"../tools/shared":  "/work/project/tools/shared",
		"../../../../x":    "/x",
		"/opt/tools//a/./": "/opt/tools/a",
	} {
		got, err := Resolve(base, p)
		require.NoError(t, err, p)
		require.Equal(t, want, got, p)
	}
	_, err := Resolve(base, "file:tools")
	require.Error(t, err)
}

func TestLoad(t *testing.T) {
	root := t.TempDir()
	good := folder(t, root, "good", sum+"tools:\n  - core.echo@1\n  - workspace.notes.write@1\n", "# Good\n\nUse echo.\n")
	ts, err := Load(good)
	require.NoError(t, err)
	require.Equal(t, graph.Toolset{Tools: []string{"core.echo@1", "workspace.notes.write@1"}, Skill: "# Good\n\nUse echo.\n",
		Summary: "Test tools."}, ts)

	empty := folder(t, root, "none", sum+"tools: []\n", "Think only.")
	ts, err = Load(empty)
	require.NoError(t, err)
	require.Equal(t, []string{}, ts.Tools)

	file := filepath.Join(root, "plain-file")
	require.NoError(t, os.WriteFile(file, []byte("x"), 0o644))
	fifoDir := folder(t, root, "fifo", sum+"tools: [core.echo@1]\n", "")
	require.NoError(t, syscall.Mkfifo(filepath.Join(fifoDir, SkillFile), 0o644))
	dirSkill := folder(t, root, "dirskill", sum+"tools: [core.echo@1]\n", "")
	require.NoError(t, os.Mkdir(filepath.Join(dirSkill, SkillFile), 0o755))

	cases := map[string]struct {
		dir  string
		want string
	}{
		"missing folder":        {filepath.Join(root, "nope"), "does not exist"},
		"not a folder":          {file, "is not a folder"},
		"missing toolset.yaml":  {folder(t, root, "nomanifest", "", "Skill."), "toolset.yaml is missing"},
		"missing SKILL.md":      {folder(t, root, "noskill", sum+"tools: [core.echo@1]\n", ""), "SKILL.md is missing"},
		"blank SKILL.md":        {folder(t, root, "blankskill", sum+"tools: [core.echo@1]\n", " \n\t\n"), "SKILL.md is empty"},
		"SKILL.md not UTF-8":    {folder(t, root, "binskill", sum+"tools: [core.echo@1]\n", "\xff\xfe"), "not valid UTF-8"},
		"SKILL.md a FIFO":       {fifoDir, "not a regular file"},
		"SKILL.md a folder":     {dirSkill, "not a regular file"},
		"SKILL.md too large":    {folder(t, root, "bigskill", sum+"tools: [core.echo@1]\n", strings.Repeat("x", MaxSkillBytes+1)), "the limit is"},
		"manifest not YAML":     {folder(t, root, "badyaml", sum+"tools: [\n", "Skill."), "toolset.yaml:"},
		"manifest a list":       {folder(t, root, "list", "- core.echo@1\n", "Skill."), "must be a mapping"},
		"manifest unknown key":  {folder(t, root, "extra", sum+"tools: []\nrun: ./install.sh\n", "Skill."), `unknown key "run"`},
		"manifest no tools":     {folder(t, root, "notools", sum, "Skill."), "tools (the actionId@version list) is required"},
		"tools not a list":      {folder(t, root, "scalar", sum+"tools: core.echo@1\n", "Skill."), "must be a list"},
		"tools null":            {folder(t, root, "null", sum+"tools:\n", "Skill."), "must be a list"},
		"entry not a string":    {folder(t, root, "number", sum+"tools: [1]\n", "Skill."), "must be an actionId@version string"},
		"entry without version": {folder(t, root, "nover", sum+"tools: [core.echo]\n", "Skill."), `"core.echo" is not actionId@version`},
		"entry bad version":     {folder(t, root, "badver", sum+"tools: [core.echo@01]\n", "Skill."), "positive version"},
		"entry duplicated":      {folder(t, root, "dup", sum+"tools: [core.echo@1, core.echo@1]\n", "Skill."), "listed twice"},
		"manifest anchors":      {folder(t, root, "anchor", "a: &x [core.echo@1]\ntools: *x\n", "Skill."), "anchors"},
	}
	// toolset.yaml's summary: required, one line of at most 600 characters.
	summaryCases := map[string]struct {
		manifest, code, want string
	}{
		"no summary":         {"tools: [core.echo@1]\n", graph.CodeMissingToolsetSummary, "summary is required"},
		"blank summary":      {"summary: '  '\ntools: []\n", graph.CodeMissingToolsetSummary, "summary is empty"},
		"summary not string": {"summary: [a]\ntools: []\n", graph.CodeInvalidToolsetSummary, "must be a string"},
		"multi-line summary": {"summary: |\n  one\n  two\ntools: []\n", graph.CodeInvalidToolsetSummary, "must be one line"},
		"over-long summary":  {"summary: " + strings.Repeat("x", 601) + "\ntools: []\n", graph.CodeInvalidToolsetSummary, "601 characters; the limit is 600"},
		"control in summary": {"summary: \"a\\u0007b\"\ntools: []\n", graph.CodeInvalidToolsetSummary, "control characters"},
	}
	for name, tc := range summaryCases {
		t.Run(name, func(t *testing.T) {
			_, err := Load(folder(t, root, strings.ReplaceAll(name, " ", "-"), tc.manifest, "Skill."))
			var te *Error
			require.ErrorAs(t, err, &te)
			require.Equal(t, tc.code, te.Code)
			require.Contains(t, te.Message, tc.want)
			require.Contains(t, te.Message, "toolset.yaml:", "the file and position are named")
		})
	}

	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			done := make(chan error, 1)
			go func() { _, err := Load(tc.dir); done <- err }()
			select {
			case err := <-done:
				var te *Error
				require.ErrorAs(t, err, &te)
				require.Equal(t, graph.CodeInvalidToolsPath, te.Code)
				require.Contains(t, te.Message, tc.want)
			case <-time.After(5 * time.Second):
				t.Fatal("Load blocked")
			}
		})
	}
}

const agentDoc = `schemaVersion: 1
tools: ./tools/shared
nodes:
  - id: in
    kind: input
    outputs: {out: any}
  - id: triage
    kind: agent
    agent: {key: triage, revision: 1}
    inputs: {in: any}
    outputs: {out: any}
  - id: report
    kind: agent
    tools: ./tools/report
    agent: {key: writer, revision: 1}
    inputs: {in: any}
    outputs: {out: any}
  - id: out
    kind: output
    inputs: {in: any}
edges:
  - {from: in.out, to: triage.in}
  - {from: triage.out, to: report.in}
  - {from: report.out, to: out.in}
`

func parse(t *testing.T, src string) *graphyaml.YAMLDocument {
	t.Helper()
	y, err := graphyaml.ParseYAML([]byte(src))
	require.NoError(t, err)
	return y
}

func TestCaptureDefaultAndOverride(t *testing.T) {
	root := t.TempDir()
	folder(t, root, "flows/tools/shared", sum+"tools: [core.echo@1, core.sleep@1]\n", "Shared skill.\n")
	folder(t, root, "flows/tools/report", sum+"tools: [core.echo@1]\n", "Report skill.\n")
	y := parse(t, agentDoc)
	captured, issues := Capture(y.Document, y.JSON, filepath.Join(root, "flows"))
	require.Empty(t, issues)
	require.Equal(t, []Captured{
		{Name: "shared", Path: "./tools/shared", Pointer: "/tools", Dir: filepath.Join(root, "flows/tools/shared")},
		{Name: "report", Path: "./tools/report", Pointer: "/nodes/2/tools", Dir: filepath.Join(root, "flows/tools/report")},
	}, captured)

	doc := y.Document
	require.Equal(t, "shared", doc.Tools)
	require.Equal(t, "", doc.Nodes[1].Tools)
	require.Equal(t, "report", doc.Nodes[2].Tools)
	require.Equal(t, map[string]graph.Toolset{
		"shared": {Tools: []string{"core.echo@1", "core.sleep@1"}, Skill: "Shared skill.\n", Summary: "Test tools."},
		"report": {Tools: []string{"core.echo@1"}, Skill: "Report skill.\n", Summary: "Test tools."},
	}, doc.Toolsets)

	// The override wins over the default; the plain agent gets the default.
	name, ts, ok := graph.EffectiveToolset(doc, doc.Nodes[2])
	require.True(t, ok)
	require.Equal(t, "report", name)
	require.Equal(t, []string{"core.echo@1"}, ts.Tools)
	name, _, ok = graph.EffectiveToolset(doc, doc.Nodes[1])
	require.True(t, ok)
	require.Equal(t, "shared", name)

	// The captured document is what the server checks: it names only toolsets.
	require.Empty(t, graph.EmptyToolsIssues(mustJSON(t, doc)))
	for _, is := range graph.Validate(doc, nil) {
		require.NotEqual(t, graph.CodeInvalidToolsPath, is.Code, "%v", is)
	}
}

func TestCaptureIsDeterministicAndDeduplicates(t *testing.T) {
	root := t.TempDir()
	folder(t, root, "a/tools", sum+"tools: [core.echo@1]\n", "A.")
	folder(t, root, "b/tools", sum+"tools: [core.sleep@1]\n", "B.")
	src := strings.NewReplacer("./tools/shared", "a/tools", "./tools/report", "./b/tools").Replace(agentDoc)
	// A third agent reaching the default folder through another spelling.
	src = strings.Replace(src, "  - id: out\n", "  - id: again\n    kind: agent\n    tools: ../flows/a/tools/\n    agent: {key: x, revision: 1}\n    inputs: {in: any}\n    outputs: {out: any}\n  - id: out\n", 1)
	require.NoError(t, os.MkdirAll(filepath.Join(root, "flows"), 0o755))
	require.NoError(t, os.Rename(filepath.Join(root, "a"), filepath.Join(root, "flows", "a")))
	require.NoError(t, os.Rename(filepath.Join(root, "b"), filepath.Join(root, "flows", "b")))

	var first []byte
	for range 3 {
		y := parse(t, src)
		_, issues := Capture(y.Document, y.JSON, filepath.Join(root, "flows"))
		require.Empty(t, issues)
		require.Equal(t, "tools", y.Document.Tools)
		require.Equal(t, "tools-2", y.Document.Nodes[2].Tools)
		require.Equal(t, "tools", y.Document.Nodes[3].Tools, "the same folder is one toolset")
		require.Len(t, y.Document.Toolsets, 2)
		b := mustJSON(t, y.Document)
		if first == nil {
			first = b
		}
		require.Equal(t, string(first), string(b))
	}
}

func TestCaptureKeepsInlineNames(t *testing.T) {
	root := t.TempDir()
	folder(t, root, "tools/report", sum+"tools: [core.echo@1]\n", "Report.")
	src := strings.Replace(agentDoc, "tools: ./tools/shared\n", "tools: report\ntoolsets:\n  report: {tools: [core.sleep@1], skill: Inline.}\n", 1)
	y := parse(t, src)
	_, issues := Capture(y.Document, y.JSON, root)
	require.Empty(t, issues)
	require.Equal(t, "report", y.Document.Tools, "an inline name stays a name")
	require.Equal(t, "report-2", y.Document.Nodes[2].Tools, "the folder gets a name of its own")
	require.Equal(t, "Inline.", y.Document.Toolsets["report"].Skill)
	require.Equal(t, "Report.", y.Document.Toolsets["report-2"].Skill)
}

func TestCaptureReportsEveryProblemAtItsPointer(t *testing.T) {
	root := t.TempDir()
	folder(t, root, "tools/blank", sum+"tools: [core.echo@1]\n", "\n")
	src := strings.NewReplacer(
		"tools: ./tools/shared\n", "tools: ''\n",
		"tools: ./tools/report\n", "tools: ./tools/missing\n",
	).Replace(agentDoc)
	src = strings.Replace(src, "    agent: {key: triage, revision: 1}\n", "    tools: file:///etc/tools\n    agent: {key: triage, revision: 1}\n", 1)
	src = strings.Replace(src, "  - id: out\n", "  - id: third\n    kind: agent\n    tools: tools/blank\n    agent: {key: x, revision: 1}\n    inputs: {in: any}\n    outputs: {out: any}\n  - id: out\n", 1)
	y := parse(t, src)
	_, issues := Capture(y.Document, y.JSON, root)
	got := map[string]string{}
	for _, is := range issues {
		require.Equal(t, graph.CodeInvalidToolsPath, is.Code)
		got[is.Path] = is.Message
	}
	require.Len(t, got, 4, "%v", issues)
	require.Contains(t, got["/tools"], "empty")
	require.Contains(t, got["/nodes/1/tools"], "URL")
	require.Contains(t, got["/nodes/2/tools"], "does not exist")
	require.Contains(t, got["/nodes/2/tools"], `"./tools/missing"`)
	require.Contains(t, got["/nodes/3/tools"], "SKILL.md is empty")
}

func TestCaptureReadsAgainEachTime(t *testing.T) {
	// A folder is content: changing it changes the next capture (and the
	// document's checksum), never a document already captured.
	root := t.TempDir()
	dir := folder(t, root, "tools/shared", sum+"tools: [core.echo@1]\n", "First.")
	folder(t, root, "tools/report", sum+"tools: [core.echo@1]\n", "Report.")
	y1 := parse(t, agentDoc)
	_, issues := Capture(y1.Document, y1.JSON, root)
	require.Empty(t, issues)
	require.NoError(t, os.WriteFile(filepath.Join(dir, SkillFile), []byte("Second."), 0o644))
	y2 := parse(t, agentDoc)
	_, issues = Capture(y2.Document, y2.JSON, root)
	require.Empty(t, issues)
	require.Equal(t, "First.", y1.Document.Toolsets["shared"].Skill)
	require.Equal(t, "Second.", y2.Document.Toolsets["shared"].Skill)
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

func TestLoadApprovalPolicies(t *testing.T) {
	root := t.TempDir()
	dir := folder(t, root, "ops", sum+"approvalTimeoutMs: 60000\ntools:\n  - core.echo@1\n  - tool: workspace.notes.write@1\n    approval: required\n  - tool: core.sleep@1\n",
		"Ask before writing.")
	ts, err := Load(dir)
	require.NoError(t, err)
	require.Equal(t, []string{"core.echo@1", "workspace.notes.write@1", "core.sleep@1"}, ts.Tools)
	require.Equal(t, map[string]string{"workspace.notes.write@1": graph.ApprovalRequired}, ts.Approval)
	require.Equal(t, 60000, ts.ApprovalTimeoutMs)

	plain, err := Load(folder(t, root, "plain", sum+"tools: [core.echo@1]\n", "s"))
	require.NoError(t, err)
	require.Nil(t, plain.Approval, "no policy, no map: the captured document is unchanged")
	require.Zero(t, plain.ApprovalTimeoutMs)

	for name, manifest := range map[string]string{
		"policy":          "tools:\n  - tool: core.echo@1\n    approval: maybe\n",
		"unknown key":     "tools:\n  - tool: core.echo@1\n    approve: required\n",
		"no tool":         "tools:\n  - approval: required\n",
		"bad ref":         "tools:\n  - tool: core.echo\n    approval: required\n",
		"twice":           "tools:\n  - core.echo@1\n  - tool: core.echo@1\n    approval: required\n",
		"timeout short":   "approvalTimeoutMs: 10\ntools: []\n",
		"timeout 31 days": "approvalTimeoutMs: 2678400000\ntools: []\n",
		"timeout text":    "approvalTimeoutMs: soon\ntools: []\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load(folder(t, root, strings.ReplaceAll(name, " ", "-"), sum+manifest, "s"))
			var te *Error
			require.ErrorAs(t, err, &te)
			require.Equal(t, graph.CodeInvalidToolsPath, te.Code, te.Message)
		})
	}
}
