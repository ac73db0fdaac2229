package main_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/internal/testinfra"
	"github.com/weftworks/weft/store"
)

// apiCall sends one JSON request to d's API with token and decodes the answer.
func apiCall(t *testing.T, d *devInstance, token, method, path string, body []byte) (int, map[string]any) {
	t.Helper()
	req, err := http.NewRequest(method, d.apiURL+path, bytes.NewReader(body))
	require.NoError(t, err)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer res.Body.Close()
	data, _ := io.ReadAll(res.Body)
	var v map[string]any
	_ = json.Unmarshal(data, &v)
	return res.StatusCode, v
}

// copyDir copies the example project into a temporary folder, so the test
// can edit its toolsets without touching the repository.
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, e os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if e.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	require.NoError(t, err)
}

// createExampleAgents creates the example's agents (examples/toolsets/agents).
func createExampleAgents(t *testing.T, d *devInstance, project string) {
	t.Helper()
	for _, name := range []string{"triage", "reporter"} {
		body, err := os.ReadFile(filepath.Join(project, "agents", name+".json"))
		require.NoError(t, err)
		code, v := apiCall(t, d, d.token, http.MethodPost, "/v1/agents", body)
		require.Equal(t, http.StatusCreated, code, "create agent %s: %d %v", name, code, v)
	}
}

// revisionToolsets reads the toolsets pinned in revision n of key.
func revisionToolsets(t *testing.T, d *devInstance, key string, n int) (string, map[string]any) {
	t.Helper()
	code, v := apiCall(t, d, d.token, http.MethodGet, "/v1/workflows/"+key+"/revisions/"+itoa(n), nil)
	require.Equal(t, http.StatusOK, code, "revision %d of %s: %d %v", n, key, code, v)
	g := v["graph"].(map[string]any)
	ts, _ := g["toolsets"].(map[string]any)
	return v["checksum"].(string), ts
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }

// TestToolsetsExample pushes, publishes and runs examples/toolsets in
// simulation through the CLI against `weft dev`, then checks the toolset
// rules end to end: a folder changed after publication does not change the
// published revision, and a missing folder, a blank SKILL.md, an unknown
// action in toolset.yaml or a missing or multi-line summary fails the push.
func TestToolsetsExample(t *testing.T) {
	d := startDev(t)
	d.waitReady()
	env := []string{"WEFT_URL=" + d.apiURL, "WEFT_TOKEN=" + d.token}
	project := filepath.Join(t.TempDir(), "toolsets")
	copyDir(t, filepath.Join(testinfra.RepoRoot(), "examples", "toolsets"), project)
	wf := filepath.Join(project, "workflow.yaml")
	createExampleAgents(t, d, project)

	r := weftCLI(t, nil, "validate", wf)
	require.Equal(t, 0, r.code, "validate:\n%s", r)
	require.Contains(t, r.stdout, "toolsets shared from ./tools/shared, report from ./tools/report", "validate:\n%s", r)
	require.Contains(t, r.stdout, "  toolset shared: Restate a ticket, pause briefly, and write at most one follow-up note per ticket. [core.echo@1, core.sleep@1, workspace.notes.write@1]", "validate:\n%s", r)
	require.NotContains(t, r.stdout, "warning:", "validate:\n%s", r)
	// Run from elsewhere: paths resolve relative to the YAML file, not the
	// working directory.
	r = weftCLI(t, env, "push", wf, "--key", "toolsets-demo")
	require.Equal(t, 0, r.code, "push:\n%s", r)
	require.Contains(t, r.stdout, "pushed toolsets-demo: draft revision 1", "push:\n%s", r)
	require.Contains(t, r.stdout, "toolset shared from "+filepath.Join(project, "tools", "shared")+": 3 tool(s)", "push:\n%s", r)
	require.Contains(t, r.stdout, "toolset report from "+filepath.Join(project, "tools", "report")+": 1 tool(s)", "push:\n%s", r)
	r = weftCLI(t, env, "publish", "toolsets-demo")
	require.Equal(t, 0, r.code, "publish:\n%s", r)
	sum1, pinned := revisionToolsets(t, d, "toolsets-demo", 1)
	skill, _ := os.ReadFile(filepath.Join(project, "tools", "report", "SKILL.md"))
	report := pinned["report"].(map[string]any)
	require.True(t, report["skill"] == string(skill), "pinned report toolset: %v", report)
	require.Len(t, report["tools"].([]any), 1, "pinned report toolset: %v", report)
	require.True(t, report["summary"] == "Restate a triage result to check it before summarising it; nothing is written.", "pinned report toolset: %v", report)
	code, rev := apiCall(t, d, d.token, http.MethodGet, "/v1/workflows/toolsets-demo/revisions/1", nil)
	g := rev["graph"].(map[string]any)
	require.Equal(t, http.StatusOK, code, "revision graph: %v", g)
	require.True(t, g["tools"] == "shared", "revision graph: %v", g)
	for _, n := range g["nodes"].([]any) {
		node := n.(map[string]any)
		assert.False(t, node["id"] == "report" && node["tools"] != "report", "report node tools = %v", node["tools"])
	}

	// Run it in simulation.
	r = weftCLI(t, env, "run", "toolsets-demo", "--mode", "simulation", "--input", `{"id":"T-1","text":"printer on fire"}`, "--wait")
	require.Equal(t, 0, r.code, "run in simulation:\n%s", r)
	require.Contains(t, r.stdout, "mode simulation", "run in simulation:\n%s", r)
	require.Contains(t, r.stdout, " succeeded in ", "run in simulation:\n%s", r)
	t.Logf("weft run --mode simulation --wait:\n%s", r.stdout)

	// The folder changes after publication: the published revision does
	// not; a push makes a new draft, whose publication is a new revision.
	require.NoError(t, os.WriteFile(filepath.Join(project, "tools", "report", "SKILL.md"), []byte("# Report tools\n\nSay less.\n"), 0o644))
	sum, again := revisionToolsets(t, d, "toolsets-demo", 1)
	require.Equal(t, sum1, sum, "revision 1 changed with the folder: %s %v", sum, again)
	require.True(t, again["report"].(map[string]any)["skill"] == string(skill), "revision 1 changed with the folder: %s %v", sum, again)
	r = weftCLI(t, env, "push", wf, "--key", "toolsets-demo")
	require.Equal(t, 0, r.code, "push after edit:\n%s", r)
	require.Contains(t, r.stdout, "draft revision 2", "push after edit:\n%s", r)
	sum, again = revisionToolsets(t, d, "toolsets-demo", 1)
	require.Equal(t, sum1, sum, "revision 1 changed after a new push: %s %v", sum, again)
	require.True(t, again["report"].(map[string]any)["skill"] == string(skill), "revision 1 changed after a new push: %s %v", sum, again)
	r = weftCLI(t, env, "publish", "toolsets-demo")
	require.Equal(t, 0, r.code, "publish after edit:\n%s", r)
	require.Contains(t, r.stdout, "revision 2 from draft 2", "publish after edit:\n%s", r)
	sum2, now := revisionToolsets(t, d, "toolsets-demo", 2)
	require.NotEqual(t, sum1, sum2, "revision 2: %s %v", sum2, now)
	require.True(t, now["report"].(map[string]any)["skill"] == "# Report tools\n\nSay less.\n", "revision 2: %s %v", sum2, now)

	// A push that cannot capture its folders saves nothing.
	push := func(name, wantOut string) {
		t.Helper()
		r := weftCLI(t, env, "push", wf, "--key", "toolsets-demo")
		assert.False(t, r.code != 1 || !strings.Contains(r.stdout+r.stderr, wantOut), "%s: push should fail with %q\n%s", name, wantOut, r)
		code, v := apiCall(t, d, d.token, http.MethodGet, "/v1/workflows/toolsets-demo", nil)
		assert.False(t, code != http.StatusOK || v["draftRevision"].(float64) != 2, "%s: a draft was saved: %v", name, v)
	}
	blank := filepath.Join(project, "tools", "report", "SKILL.md")
	require.NoError(t, os.WriteFile(blank, []byte("  \n\n"), 0o644))
	push("blank SKILL.md", "INVALID_TOOLS_PATH /nodes/2/tools tools \"./tools/report\": "+blank+" is empty")
	require.NoError(t, os.Remove(blank))
	push("missing SKILL.md", blank+" is missing")
	require.NoError(t, os.WriteFile(blank, []byte("Back.\n"), 0o644))
	require.NoError(t, os.Rename(filepath.Join(project, "tools", "shared"), filepath.Join(project, "tools", "gone")))
	push("missing folder", wf+":13:1 INVALID_TOOLS_PATH /tools tools \"./tools/shared\": toolset folder "+filepath.Join(project, "tools", "shared")+" does not exist")
	require.NoError(t, os.Rename(filepath.Join(project, "tools", "gone"), filepath.Join(project, "tools", "shared")))
	manifest := filepath.Join(project, "tools", "shared", "toolset.yaml")
	require.NoError(t, os.WriteFile(manifest, []byte("summary: Shared.\ntools:\n  - core.echo@1\n  - core.teleport@1\n"), 0o644))
	push("unknown action", "MISSING_DEPENDENCY /toolsets/shared/tools/1 action core.teleport@1 is not in the catalog")
	r = weftCLI(t, nil, "validate", wf)
	assert.False(t, r.code != 1 || !strings.Contains(r.stdout, wf+":13:1 MISSING_DEPENDENCY /toolsets/shared/tools/1"), "validate with an unknown action:\n%s", r)
	require.NoError(t, os.WriteFile(manifest, []byte("summary: Shared.\ntools: [core.echo@1]\nrun: ./install.sh\n"), 0o644))
	push("manifest with a command", `unknown key "run"`)
	// A toolset without a summary, or with one that is not one line of at
	// most 600 characters, is refused with its own code.
	require.NoError(t, os.WriteFile(manifest, []byte("tools: [core.echo@1]\n"), 0o644))
	push("no summary", "MISSING_TOOLSET_SUMMARY /tools tools \"./tools/shared\": "+manifest+":1:1: summary is required")
	require.NoError(t, os.WriteFile(manifest, []byte("summary: |\n  one\n  two\ntools: [core.echo@1]\n"), 0o644))
	push("multi-line summary", "INVALID_TOOLSET_SUMMARY /tools tools \"./tools/shared\": "+manifest+":1:1: summary must be one line")
	r = weftCLI(t, nil, "validate", wf)
	assert.False(t, r.code != 1 || !strings.Contains(r.stdout, "INVALID_TOOLSET_SUMMARY"), "validate with a multi-line summary:\n%s", r)
}

// toolEvents maps node → tool → "type: reason message" from a run's events.
func toolEvents(t *testing.T, env []string, runID string) map[string]map[string]string {
	t.Helper()
	r := weftCLI(t, env, "events", "--json", runID)
	require.Equal(t, 0, r.code, "events:\n%s", r)
	out := map[string]map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(r.stdout), "\n") {
		var ev struct {
			Type   string `json:"type"`
			NodeID string `json:"nodeId"`
			Data   struct {
				Tool    string `json:"tool"`
				Reason  string `json:"reason"`
				Message string `json:"message"`
			} `json:"data"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &ev), "event line %q", line)
		if !strings.HasPrefix(ev.Type, "tool.") || ev.Type == "tool.started" {
			continue
		}
		if out[ev.NodeID] == nil {
			out[ev.NodeID] = map[string]string{}
		}
		out[ev.NodeID][ev.Data.Tool] = strings.TrimSpace(ev.Type + ": " + ev.Data.Reason + " " + ev.Data.Message)
	}
	return out
}

// TestAgentSeesTheIntersectedTools runs examples/toolsets live with the sim
// provider, whose scripts call every tool the agents might meet. An agent
// is offered exactly the tools in its allowedTools AND its node's toolset
// (the node's override, else the workflow default) AND the run's
// permission snapshot; the events show each call completed or denied with
// the term it failed.
func TestAgentSeesTheIntersectedTools(t *testing.T) {
	d := startDev(t)
	d.waitReady()
	project := filepath.Join(t.TempDir(), "toolsets")
	copyDir(t, filepath.Join(testinfra.RepoRoot(), "examples", "toolsets"), project)
	createExampleAgents(t, d, project)
	full := []string{"WEFT_URL=" + d.apiURL, "WEFT_TOKEN=" + d.token}
	pushed := weftCLI(t, full, "push", filepath.Join(project, "workflow.yaml"), "--key", "toolsets-demo")
	require.Equal(t, 0, pushed.code, "push:\n%s", pushed)
	published := weftCLI(t, full, "publish", "toolsets-demo")
	require.Equal(t, 0, published.code, "publish:\n%s", published)
	// A token of the same tenant without notes.write.
	narrow := runWeft(t, []string{"WEFT_DATA_DIR=" + d.dataDir, "WEFT_JWT_SECRET="},
		"token", "--tenant", "dev", "--sub", "viewer", "--scope", "runs.execute,runs.read,workflows.read")
	limited := []string{"WEFT_URL=" + d.apiURL, "WEFT_TOKEN=" + narrow}

	input := `{"id":"T-7","text":"printer on fire"}`
	denied := "tool.denied: " + agents.ReasonNotGranted + " "
	r := weftCLI(t, limited, "run", "toolsets-demo", "--input", input, "--wait")
	require.Equal(t, 0, r.code, "live run without notes.write:\n%s", r)
	t.Logf("weft run --wait (no notes.write):\n%s", r.stdout)
	got := toolEvents(t, limited, runIDOf(t, r))
	want := map[string]map[string]string{
		// triage selects the default, tools/shared: echo, sleep, notes.write.
		"triage": {
			"core.echo@1":             "tool.completed:",
			"core.sleep@1":            denied + "core.sleep@1 is not granted: it is not in the agent's allowed tools",
			"core.fail@1":             denied + "core.fail@1 is not granted: it is not in the node's toolset",
			"workspace.notes.write@1": denied + "workspace.notes.write@1 is not granted: the run's permissions lack notes.write",
		},
		// report overrides it with tools/report: echo only.
		"report": {
			"core.echo@1":             "tool.completed:",
			"workspace.notes.write@1": denied + "workspace.notes.write@1 is not granted: it is not in the node's toolset",
		},
	}
	assert.True(t, equalNested(got, want), "tool events without notes.write:\n got %v\nwant %v", got, want)
	checkPinnedSkills(t, d, project, runIDOf(t, r))

	// With notes.write in the snapshot the triage agent is offered it too;
	// the report node still is not (its toolset does not list it).
	r = weftCLI(t, full, "run", "toolsets-demo", "--input", input, "--wait")
	require.Equal(t, 0, r.code, "live run with notes.write:\n%s", r)
	got = toolEvents(t, full, runIDOf(t, r))
	want["triage"]["workspace.notes.write@1"] = "tool.completed:"
	assert.True(t, equalNested(got, want), "tool events with notes.write:\n got %v\nwant %v", got, want)
}

func equalNested(a, b map[string]map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, m := range a {
		n, ok := b[k]
		if !ok || len(m) != len(n) {
			return false
		}
		for kk, v := range m {
			if n[kk] != v {
				return false
			}
		}
	}
	return true
}

// checkPinnedSkills reads the run's saved agent transcripts: each agent's
// instructions end with the SKILL.md of its node's effective toolset (the
// override for report, the default for triage), never the other one.
func checkPinnedSkills(t *testing.T, d *devInstance, project, runID string) {
	t.Helper()
	dbURL := ""
	for _, kv := range d.cmd.Env {
		if v, ok := strings.CutPrefix(kv, "DATABASE_URL="); ok {
			dbURL = v
		}
	}
	ctx := context.Background()
	st, err := store.Open(ctx, dbURL)
	require.NoError(t, err)
	defer st.Close()
	skill := func(folder string) string {
		b, err := os.ReadFile(filepath.Join(project, "tools", folder, "SKILL.md"))
		require.NoError(t, err)
		return string(b)
	}
	for node, folders := range map[string][2]string{"triage": {"shared", "report"}, "report": {"report", "shared"}} {
		tr, err := st.GetAgentTranscript(ctx, "dev", runID, node)
		require.NoError(t, err, "transcript of %s", node)
		var saved agents.Transcript
		require.NoError(t, json.Unmarshal(tr.Transcript, &saved))
		system := saved.Messages[0].Content
		assert.False(t, !strings.HasSuffix(system, "\n\n"+skill(folders[0])) || strings.Contains(system, skill(folders[1])), "%s instructions do not end with tools/%s/SKILL.md alone:\n%s", node, folders[0], system)
	}
}

// TestValidateShowsToolsetSummaries: weft validate (offline) lists each
// toolset with its summary, and warns about one without a summary (a
// document written before summaries existed) without failing.
func TestValidateShowsToolsetSummaries(t *testing.T) {
	dir := t.TempDir()
	doc := `schemaVersion: 1
tools: ops
toolsets:
  ops: {tools: [core.echo@1], skill: Echo first., summary: Echo values back.}
  legacy: {tools: [core.sleep@1], skill: Wait.}
nodes:
  - {id: in, kind: input, outputs: {out: any}}
  - {id: out, kind: output, inputs: {in: any}}
edges:
  - {from: in.out, to: out.in}
`
	wf := writeFile(t, dir, "flow.yaml", doc)
	r := weftCLI(t, nil, "validate", wf)
	require.Equal(t, 0, r.code, "validate:\n%s", r)
	require.Contains(t, r.stdout, "  toolset ops: Echo values back. [core.echo@1]", "validate:\n%s", r)
	require.Contains(t, r.stdout, "  toolset legacy: (no summary) [core.sleep@1]", "validate:\n%s", r)
	require.Contains(t, r.stdout, "warning: "+wf+":5:", "validate:\n%s", r)
	require.Contains(t, r.stdout, "MISSING_TOOLSET_SUMMARY /toolsets/legacy/summary", "validate:\n%s", r)
	bad := writeFile(t, dir, "bad.yaml", strings.Replace(doc, "summary: Echo values back.", "summary: \"one\\ntwo\"", 1))
	r = weftCLI(t, nil, "validate", bad)
	require.Equal(t, 1, r.code, "validate a multi-line summary:\n%s", r)
	require.Contains(t, r.stdout, "INVALID_TOOLSET_SUMMARY /toolsets/ops/summary", "validate a multi-line summary:\n%s", r)
}
