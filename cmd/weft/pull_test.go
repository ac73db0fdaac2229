package main_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// gateYAML has what a YAML writer must keep exactly: a multi-line gate
// expression, a schema, a template with bindings, a literal.
const gateYAML = `schemaVersion: 1
schemas:
  Item: {type: object, required: [id], properties: {id: {type: string}, note: {type: string}}}
nodes:
  - {id: in, kind: input, outputs: {out: Item}}
  - id: check
    kind: gate
    language: cel/v1
    expression: |
      input.id != ''
        && input.id != "no: way"
    inputs: {in: Item}
    outputs: {pass: Item, fail: Item}
  - id: echo
    kind: action
    action: {id: core.echo, version: 1}
    inputs: {in: Item}
    outputs: {out: any}
    mapping:
      id: {pointer: /in/id}
      greeting: {template: "Hello {{ item.id }}: yes", bindings: {item.id: /in/id}}
      flags: {literal: {on: "on", n: 017x, list: [1, 2.50, "3"], empty: {}}}
    retry: {maxAttempts: 2, backoff: 1.5}
  - {id: out, kind: output, inputs: {in: any}}
edges:
  - {from: in.out, to: check.in}
  - {from: check.pass, to: echo.in}
  - {from: echo.out, to: out.in}
`

var (
	checksumLine  = regexp.MustCompile(`(?m)^checksum ([0-9a-f]{64}) `)
	publishedLine = regexp.MustCompile(`checksum ([0-9a-f]{64})\)`)
)

// TestPullPushRoundTrip: what weft pull writes (a draft, or a published
// revision) pushes, validates and publishes to the same checksum.
func TestPullPushRoundTrip(t *testing.T) {
	d := startDev(t)
	d.waitReady()
	env := []string{"WEFT_URL=" + d.apiURL, "WEFT_TOKEN=" + d.token}
	dir := t.TempDir()
	src := writeFile(t, dir, "gate.yaml", gateYAML)

	must := func(want string, args ...string) cliResult {
		t.Helper()
		r := weftCLI(t, env, args...)
		require.Equal(t, 0, r.code, "want %q:\n%s", want, r)
		require.Contains(t, r.stdout, want, "want %q:\n%s", want, r)
		return r
	}
	sumOf := func(re *regexp.Regexp, r cliResult) string {
		t.Helper()
		m := re.FindStringSubmatch(r.stdout)
		require.NotNil(t, m, "no checksum printed:\n%s", r)
		return m[1]
	}
	want := sumOf(checksumLine, must("valid (4 nodes, 3 edges)", "validate", src))
	must("pushed gate: draft revision 1", "push", src, "--key", "gate")
	got := sumOf(publishedLine, must("published gate revision 1", "publish", "gate"))
	require.Equal(t, want, got, "published checksum %s, weft validate said %s", got, want)

	// The latest draft and the published revision, to files and to stdout.
	draftFile := filepath.Join(dir, "pulled", "draft.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(draftFile), 0o755))
	must("pulled gate draft revision 1 into "+draftFile, "pull", "gate", "-o", draftFile)
	revFile := filepath.Join(dir, "pulled", "rev.yaml")
	must("pulled gate revision 1 (checksum "+want+", from draft 1) into "+revFile, "pull", "gate", "--revision", "1", "-o", revFile)
	stdout := must("schemaVersion: 1\n", "pull", "gate", "--draft", "1")
	b, _ := os.ReadFile(draftFile)
	require.Equal(t, stdout.stdout, string(b), "pull to stdout and to a file differ:\n%s\n---\n%s", b, stdout.stdout)
	assert.Contains(t, stdout.stdout, "    expression: |\n      input.id != ''\n        && input.id != \"no: way\"\n", "the expression is not a literal block:\n%s", stdout.stdout)

	for i, f := range []string{draftFile, revFile} {
		key := []string{"from-draft", "from-revision"}[i]
		got := sumOf(checksumLine, must("valid (4 nodes, 3 edges)", "validate", f))
		assert.Equal(t, want, got, "weft validate %s: checksum %s, want %s", f, got, want)
		must("pushed "+key+": draft revision 1", "push", f, "--key", key)
		got = sumOf(publishedLine, must("published "+key+" revision 1", "publish", key))
		assert.Equal(t, want, got, "%s published to checksum %s, want %s", f, got, want)
	}

	// Two authors pull draft 1; the second pushes a change first. The
	// first author's push would replace it unawares: refused, nothing
	// saved, until --force says so.
	alice := filepath.Join(dir, "alice", "gate.yaml")
	bob := filepath.Join(dir, "bob", "gate.yaml")
	for _, f := range []string{alice, bob} {
		require.NoError(t, os.MkdirAll(filepath.Dir(f), 0o755))
		must("pulled gate draft revision 1", "pull", "gate", "-o", f)
	}
	state, err := os.ReadFile(filepath.Join(filepath.Dir(alice), ".weft-drafts.json"))
	require.NoError(t, err, "pull -o records the draft next to the file: %s", state)
	require.Contains(t, string(state), `"api": "`+d.apiURL+`"`, "pull -o records the draft next to the file: %s %v", state, err)
	require.Contains(t, string(state), `"draftRevision": 1`, "pull -o records the draft next to the file: %s %v", state, err)
	edit := func(f, from, to string) {
		t.Helper()
		b, err := os.ReadFile(f)
		require.NoError(t, err, "%s lacks %q: %v\n%s", f, from, err, b)
		require.Contains(t, string(b), from, "%s lacks %q: %v\n%s", f, from, err, b)
		require.NoError(t, os.WriteFile(f, []byte(strings.Replace(string(b), from, to, 1)), 0o644))
	}
	edit(bob, "maxAttempts: 2", "maxAttempts: 3")
	must("pushed gate: draft revision 2", "push", bob, "--key", "gate")
	edit(alice, "backoff: 1.5", "backoff: 2")
	for _, args := range [][]string{{"push", alice, "--key", "gate"}, {"push", alice, "--key", "gate", "--expected-revision", "1"}} {
		r := weftCLI(t, env, args...)
		require.Equal(t, 1, r.code, "a push over a newer draft must be refused:\n%s", r)
		require.Contains(t, r.stderr, "push gate refused, nothing saved: gate's latest draft is 2, not draft 1", "a push over a newer draft must be refused:\n%s", r)
		require.Contains(t, r.stderr, "--force", "a push over a newer draft must be refused:\n%s", r)
	}
	r := weftCLI(t, env, "pull", "gate", "--draft", "3")
	require.Equal(t, 1, r.code, "a refused push saved a draft:\n%s", r)
	r = weftCLI(t, env, "push", alice, "--key", "gate", "--force", "--expected-revision", "2")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "give one of them"), "--force with --expected-revision:\n%s", r)
	must("pushed gate: draft revision 3", "push", alice, "--key", "gate", "--force")
	must("pushed gate: draft revision 4", "push", alice, "--key", "gate")
	must("pushed gate: draft revision 5", "push", alice, "--key", "gate", "--expected-revision", "4")
	// Bob's record is draft 2: his next push is refused in turn.
	r = weftCLI(t, env, "push", bob, "--key", "gate")
	assert.False(t, r.code != 1 || !strings.Contains(r.stderr, "latest draft is 5, not draft 2"), "bob's stale push:\n%s", r)

	// Refusals name the problem.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"pull", "gate", "--revision", "2"}, "NOT_FOUND: revision 2 of workflow \"gate\" not found"},
		{[]string{"pull", "gate", "--draft", "7"}, "NOT_FOUND: draft revision 7 of workflow \"gate\" not found"},
		{[]string{"pull", "nope"}, "NOT_FOUND"},
		{[]string{"pull", "gate", "--draft", "1", "--revision", "1"}, "give one of them"},
	} {
		r := weftCLI(t, env, c.args...)
		assert.False(t, r.code != 1 || !strings.Contains(r.stderr, c.want), "want exit 1 and %q:\n%s", c.want, r)
	}
}
