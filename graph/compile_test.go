package graph

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestGenGraphShape(t *testing.T) {
	doc := genGraph(66, 3)
	require.Len(t, doc.Nodes, 200)
	require.Len(t, doc.Edges, 400)
	require.Empty(t, Validate(doc, testCatalog()))
}

func TestCompileExample(t *testing.T) {
	c, issues := Compile(exampleDoc(t), testCatalog())
	require.Empty(t, issues)
	require.NotNil(t, issues, "an empty issue list marshals as []")
	require.Equal(t, []string{"in", "check", "save", "out"}, c.Order)
	require.Equal(t, c.Order, nodeIDs(c.Document.Nodes))
	require.Equal(t, []Edge{{"check.pass", "save.in"}, {"in.out", "check.in"}, {"save.out", "out.in"}}, c.Document.Edges)
	require.Equal(t, []string{"notes.write"}, c.Permissions)
	require.Equal(t, map[string][]string{"save": {"notes.write"}}, c.NodePermissions)
	require.Len(t, c.Actions, 1)
	wantHash, err := c.Actions[0].ActionContract.ContentHash()
	require.NoError(t, err)
	require.Equal(t, wantHash, c.Actions[0].Hash)
	require.Empty(t, c.Agents)
	require.Len(t, c.Checksum, 64)
	// Authored content is kept: no defaults filled into the document.
	require.Equal(t, &Retry{MaxAttempts: 3, InitialIntervalMs: 1000, Backoff: 2}, c.Document.Nodes[2].Retry)
	require.Nil(t, c.Document.Nodes[1].Retry)
	// 6 + 10 overhead; in, out: 1 each; gate: 5; action: 3 attempts · 7 + 2 delays · 6.
	require.Equal(t, 6+10+1+1+5+3*7+2*6, c.EstimatedHistoryEvents)
}

func TestCompiledRoundTrip(t *testing.T) {
	c, issues := Compile(genGraph(5, 2), testCatalog())
	require.Empty(t, issues)
	require.NoError(t, c.VerifyChecksum())
	b, err := json.Marshal(c)
	require.NoError(t, err)
	var back Compiled
	require.NoError(t, json.Unmarshal(b, &back))
	require.NoError(t, back.VerifyChecksum(), "a stored revision verifies after a JSON round trip")
	require.Equal(t, c.Plan(), back.Plan())

	// The compiled document itself compiles to the same revision.
	again, issues := Compile(&back.Document, testCatalog())
	require.Empty(t, issues)
	require.Equal(t, c.Checksum, again.Checksum)

	back.Document.Nodes[1].Expression = "false"
	require.Error(t, back.VerifyChecksum())
}

func TestPlan(t *testing.T) {
	c, issues := Compile(exampleDoc(t), testCatalog())
	require.Empty(t, issues)
	p := c.Plan()
	require.Equal(t, c.Checksum, p.Checksum)
	require.Equal(t, []PlanNode{
		{ID: "in", Kind: KindInput, Index: 0, Retry: NormalizeRetry(nil), Summary: "in · input",
			Outputs: []PlanOutput{{Port: "out", To: []PortRef{{"check", "in"}}}}},
		{ID: "check", Kind: KindGate, Index: 1, Retry: NormalizeRetry(nil), TimeoutMs: DefaultLocalTimeoutMs, Summary: "check · gate",
			Inputs:  []PlanInput{{Port: "in", FromNode: "in", FromPort: "out"}},
			Outputs: []PlanOutput{{Port: "fail"}, {Port: "pass", To: []PortRef{{"save", "in"}}}}},
		{ID: "save", Kind: KindAction, Index: 2, Summary: "save · action", TimeoutMs: 30000,
			Retry:   Retry{MaxAttempts: 3, InitialIntervalMs: 1000, Backoff: 2, MaxIntervalMs: DefaultMaxIntervalMs},
			Inputs:  []PlanInput{{Port: "in", FromNode: "check", FromPort: "pass"}},
			Outputs: []PlanOutput{{Port: "out", To: []PortRef{{"out", "in"}}}}},
		{ID: "out", Kind: KindOutput, Index: 3, Retry: NormalizeRetry(nil), Summary: "out · output",
			Inputs: []PlanInput{{Port: "in", FromNode: "save", FromPort: "out"}}},
	}, p.Nodes)
}

// An action node is ReadOnly in the plan when its pinned action's risk is
// read (core.echo), and no other node is: the example's save runs a
// workspace-write action.
func TestPlanReadOnly(t *testing.T) {
	c, issues := Compile(genGraph(5, 2), testCatalog())
	require.Empty(t, issues)
	actions := 0
	for _, n := range c.Plan().Nodes {
		require.Equal(t, n.Kind == KindAction, n.ReadOnly, n.ID)
		if n.ReadOnly {
			actions++
		}
	}
	require.Positive(t, actions)

	c, issues = Compile(exampleDoc(t), testCatalog())
	require.Empty(t, issues)
	for _, n := range c.Plan().Nodes {
		require.False(t, n.ReadOnly, "%s (save writes the workspace)", n.ID)
	}
	b, err := json.Marshal(c.Plan())
	require.NoError(t, err)
	require.NotContains(t, string(b), "readOnly", "a plan without read actions encodes as before")
}

func TestPlanDefaults(t *testing.T) {
	require.Equal(t, Retry{MaxAttempts: 1, InitialIntervalMs: 1000, Backoff: 2, MaxIntervalMs: 60000}, NormalizeRetry(nil))
	require.Equal(t, Retry{MaxAttempts: 2, InitialIntervalMs: 90000, Backoff: 2, MaxIntervalMs: 90000},
		NormalizeRetry(&Retry{MaxAttempts: 2, InitialIntervalMs: 90000}))
	for k, want := range map[Kind]int{KindAction: 30000, KindAgent: 120000, KindAgentDecision: 120000,
		KindGate: 5000, KindValidator: 5000, KindMerge: 5000, KindInput: 0, KindOutput: 0} {
		require.Equal(t, want, DefaultTimeoutMs(k), k)
	}
	r := Retry{InitialIntervalMs: 1000, Backoff: 3, MaxIntervalMs: 20000}
	require.Equal(t, []int{1000, 3000, 9000, 20000, 20000},
		[]int{r.RetryDelayMs(1), r.RetryDelayMs(2), r.RetryDelayMs(3), r.RetryDelayMs(4), r.RetryDelayMs(9)})
}

func TestCompileOrderTiesByID(t *testing.T) {
	doc, err := Decode([]byte(`{"schemaVersion":1,"nodes":[
	  {"id":"in","kind":"input","outputs":{"out":"any"}},
	  {"id":"zeta","kind":"gate","inputs":{"in":"any"},"outputs":{"pass":"any","fail":"any"},"language":"cel/v1","expression":"true"},
	  {"id":"alpha","kind":"gate","inputs":{"in":"any"},"outputs":{"pass":"any","fail":"any"},"language":"cel/v1","expression":"true"},
	  {"id":"mid","kind":"merge","inputs":{"z":"any","a":"any"},"outputs":{"out":"any"}},
	  {"id":"b-out","kind":"output","inputs":{"in":"any"}},
	  {"id":"a-out","kind":"output","inputs":{"in":"any"}}],
	 "edges":[{"from":"in.out","to":"zeta.in"},{"from":"in.out","to":"alpha.in"},
	  {"from":"zeta.pass","to":"mid.z"},{"from":"alpha.pass","to":"mid.a"},
	  {"from":"mid.out","to":"b-out.in"},{"from":"zeta.fail","to":"a-out.in"}]}`))
	require.NoError(t, err)
	c, issues := Compile(doc, nil)
	require.Empty(t, issues)
	require.Equal(t, []string{"in", "alpha", "zeta", "a-out", "mid", "b-out"}, c.Order)
}

// TestChecksumIgnoresOrder compiles one graph 100 times with its nodes,
// edges, map insertion and JSON key order shuffled, and its whitespace and
// number spelling varied: one order, one checksum.
func TestChecksumIgnoresOrder(t *testing.T) {
	base := genGraph(10, 3)
	base.Tools = "ops"
	want, issues := Compile(base, testCatalog())
	require.Empty(t, issues)

	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 100 {
		doc := cloneDoc(t, base)
		rng.Shuffle(len(doc.Nodes), func(a, b int) { doc.Nodes[a], doc.Nodes[b] = doc.Nodes[b], doc.Nodes[a] })
		rng.Shuffle(len(doc.Edges), func(a, b int) { doc.Edges[a], doc.Edges[b] = doc.Edges[b], doc.Edges[a] })
		// Rebuild the schemas map in another insertion order.
		names := slices.Sorted(maps.Keys(doc.Schemas))
		rng.Shuffle(len(names), func(a, b int) { names[a], names[b] = names[b], names[a] })
		schemas := map[string]json.RawMessage{}
		for _, n := range names {
			schemas[n] = doc.Schemas[n]
		}
		doc.Schemas = schemas

		raw, err := json.Marshal(doc)
		require.NoError(t, err)
		var tree any
		dec := json.NewDecoder(bytes.NewReader(raw))
		dec.UseNumber()
		require.NoError(t, dec.Decode(&tree))
		var buf bytes.Buffer
		writeShuffled(&buf, rng, tree)

		got, err := Decode(buf.Bytes())
		require.NoError(t, err, "round %d: %s", i, buf.String())
		c, issues := Compile(got, testCatalog())
		require.Empty(t, issues)
		require.Equal(t, want.Order, c.Order, "round %d", i)
		require.Equal(t, want.Checksum, c.Checksum, "round %d", i)
	}
}

func TestChecksumChangesWithContent(t *testing.T) {
	base, issues := Compile(genGraph(3, 1), testCatalog())
	require.Empty(t, issues)
	seen := map[string]string{base.Checksum: "base"}
	changes := map[string]func(d *Document){
		"expression": func(d *Document) { d.Nodes[1].Expression = "input != null && 1 >= 0" },
		"literal":    func(d *Document) { d.Nodes[2].Mapping["lit"] = Mapping{Literal: json.RawMessage(`{"k":0}`)} },
		"schema":     func(d *Document) { d.Schemas["Notes"] = json.RawMessage(`{"type":"array"}`) },
		"retry":      func(d *Document) { d.Nodes[2].Retry.MaxAttempts = 4 },
		"timeout":    func(d *Document) { d.Nodes[2].TimeoutMs = 10_001 },
		"skill":      func(d *Document) { d.Toolsets["ops"] = Toolset{Tools: []string{"core.echo@1"}, Skill: "x"} },
		"tools":      func(d *Document) { d.Tools = "ops" },
		"summary": func(d *Document) {
			ts := d.Toolsets["ops"]
			ts.Summary = "Echo and sleep."
			d.Toolsets["ops"] = ts
		},
		"edge": func(d *Document) {
			i := slices.Index(d.Edges, Edge{From: "g0.fail", To: "m0.b"})
			d.Edges[i].From = "g0.pass"
		},
	}
	for name, change := range changes {
		doc := cloneDoc(t, genGraph(3, 1))
		change(doc)
		c, issues := Compile(doc, testCatalog())
		require.Empty(t, issues, name)
		prev, dup := seen[c.Checksum]
		require.Falsef(t, dup, "%s has the same checksum as %s", name, prev)
		seen[c.Checksum] = name
	}

	// A different pinned contract under the same reference changes it too.
	cat := testCatalog()
	echo, _ := cat.Action("core.echo", 1)
	echo.Description = "changed"
	cat = NewStaticCatalog([]ActionContract{echo}, nil)
	c, issues := Compile(genGraph(3, 1), mergeCatalogs{cat, testCatalog()})
	require.Empty(t, issues)
	require.NotEqual(t, base.Checksum, c.Checksum)
}

func TestDryRun(t *testing.T) {
	res := DryRun(exampleDoc(t), testCatalog())
	c, _ := Compile(exampleDoc(t), testCatalog())
	require.True(t, res.Valid)
	require.Empty(t, res.Issues)
	require.Equal(t, c.Order, res.Order)
	require.Equal(t, c.Checksum, res.Checksum)
	require.Equal(t, []string{"notes.write"}, res.Permissions)
	require.Equal(t, ReferenceSet{Actions: []ActionRef{{"workspace.notes.write", 1}}, Agents: []AgentRef{}}, res.References)
	require.Equal(t, DefaultLimits, res.Limits)

	doc := exampleDoc(t)
	doc.Nodes[1].Expression = "nope"
	res = DryRun(doc, testCatalog())
	require.False(t, res.Valid)
	require.Equal(t, []string{"INVALID_EXPRESSION /nodes/1/expression"}, issueKeys(res.Issues))
	require.Equal(t, c.Order, res.Order, "order is still computed for an acyclic draft")
	require.Empty(t, res.Checksum)
	require.Equal(t, []string{"notes.write"}, res.Permissions)

	cyc, err := Decode([]byte(cycleJSON))
	require.NoError(t, err)
	res = DryRun(cyc, nil)
	require.False(t, res.Valid)
	require.Equal(t, []string{}, res.Order)
	b, err := json.Marshal(res)
	require.NoError(t, err)
	require.Contains(t, string(b), `"order":[]`)
	require.Contains(t, string(b), `"permissions":[]`)
}

type mergeCatalogs []Catalog

func (m mergeCatalogs) Action(id string, v int) (ActionContract, bool) {
	for _, c := range m {
		if a, ok := c.Action(id, v); ok {
			return a, true
		}
	}
	return ActionContract{}, false
}

func (m mergeCatalogs) Agent(key string, r int) (AgentContract, bool) {
	for _, c := range m {
		if a, ok := c.Agent(key, r); ok {
			return a, true
		}
	}
	return AgentContract{}, false
}

func (m mergeCatalogs) Skill(key string, r int) (SkillContract, bool) {
	for _, c := range m {
		if s, ok := c.Skill(key, r); ok {
			return s, true
		}
	}
	return SkillContract{}, false
}

func nodeIDs(nodes []Node) []string {
	ids := make([]string, len(nodes))
	for i, n := range nodes {
		ids[i] = n.ID
	}
	return ids
}

func cloneDoc(t testing.TB, d *Document) *Document {
	t.Helper()
	b, err := json.Marshal(d)
	require.NoError(t, err)
	out, err := Decode(b)
	require.NoError(t, err)
	return out
}

// writeShuffled writes a generic JSON tree with object keys in random order
// and random whitespace; integral json.Numbers of float fields stay valid.
func writeShuffled(buf *bytes.Buffer, rng *rand.Rand, v any) {
	ws := func() {
		buf.WriteString([]string{"", " ", "\n", "\t  "}[rng.IntN(4)])
	}
	switch t := v.(type) {
	case map[string]any:
		keys := slices.Sorted(maps.Keys(t))
		rng.Shuffle(len(keys), func(a, b int) { keys[a], keys[b] = keys[b], keys[a] })
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			ws()
			kb, _ := json.Marshal(k)
			buf.Write(kb)
			ws()
			buf.WriteByte(':')
			ws()
			writeShuffled(buf, rng, t[k])
		}
		ws()
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			ws()
			writeShuffled(buf, rng, e)
		}
		buf.WriteByte(']')
	case json.Number:
		// Spell floats differently (1.5 → 15e-1) where the value allows it.
		if f, err := t.Float64(); err == nil && f == 1.5 && rng.IntN(2) == 0 {
			buf.WriteString("15e-1")
			return
		}
		buf.WriteString(string(t))
	case string:
		// Escape some characters that need no escaping.
		if rng.IntN(2) == 0 {
			buf.WriteString(asciiJSON(t))
			return
		}
		b, _ := json.Marshal(t)
		buf.Write(b)
	default:
		b, _ := json.Marshal(t)
		buf.Write(b)
	}
}

// asciiJSON quotes s as a JSON string with every non-ASCII character
// escaped (\u00e9, or a surrogate pair beyond U+FFFF).
func asciiJSON(s string) string {
	b, _ := json.Marshal(s)
	var out strings.Builder
	for _, r := range string(b) {
		if r < utf8.RuneSelf {
			out.WriteRune(r)
			continue
		}
		for _, u := range utf16.Encode([]rune{r}) {
			fmt.Fprintf(&out, `\u%04x`, u)
		}
	}
	return out.String()
}

// fuzzRand is a random source seeded by fuzz input, so a failure replays.
func fuzzRand(data []byte) *rand.Rand {
	sum := sha256.Sum256(data)
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16])))
}

// skillCatalog is testCatalog with agent "writer" listing two tenant
// skills, and the skill revisions that exist.
func skillCatalog(skills ...SkillContract) *StaticCatalog {
	cat := testCatalog()
	cat.agents[AgentRef{Key: "writer", Revision: 1}] = AgentContract{Key: "writer", Revision: 1, Hash: "w1",
		Skills: []PinnedSkill{{Key: "tone", Revision: 2}, {Key: "format", Revision: 1}}}
	return cat.WithSkills(skills)
}

func writerDoc() *Document {
	n := agentNode("write")
	n.Agent = &AgentRef{Key: "writer", Revision: 1}
	n.Inputs = map[string]string{"in": "any"}
	return &Document{SchemaVersion: 1, Nodes: []Node{
		{ID: "in", Kind: KindInput, Outputs: map[string]string{"out": "any"}},
		n,
		{ID: "out", Kind: KindOutput, Inputs: map[string]string{"in": "any"}},
	}, Edges: []Edge{{From: "in.out", To: "write.in"}, {From: "write.out", To: "out.in"}}}
}

func TestAgentSkillsArePinnedAtPublication(t *testing.T) {
	tone := SkillContract{Key: "tone", Revision: 2, Hash: "tone2"}
	format := SkillContract{Key: "format", Revision: 1, Hash: "format1"}

	c, issues := Compile(writerDoc(), skillCatalog(tone, format))
	require.Empty(t, issues)
	require.Len(t, c.Agents, 1)
	require.Equal(t, []PinnedSkill{{Key: "tone", Revision: 2, Hash: "tone2"}, {Key: "format", Revision: 1, Hash: "format1"}},
		c.Agents[0].Skills, "pinned in the agent's order, with their content hashes")
	require.NoError(t, c.VerifyChecksum())

	// The skills' content is in the checksum.
	other := format
	other.Hash = "format1-changed"
	c2, issues := Compile(writerDoc(), skillCatalog(tone, other))
	require.Empty(t, issues)
	require.NotEqual(t, c.Checksum, c2.Checksum)

	// A missing or archived skill is refused where the agent is referenced.
	_, issues = Compile(writerDoc(), skillCatalog(tone))
	require.Len(t, issues, 1)
	require.Equal(t, CodeMissingDependency, issues[0].Code)
	require.Equal(t, "/nodes/1/agent", issues[0].Path)
	require.Contains(t, issues[0].Message, "skill format@1, which is not stored")
	archived := tone
	archived.Archived = true
	_, issues = Compile(writerDoc(), skillCatalog(archived, format))
	require.Len(t, issues, 1)
	require.Equal(t, CodeMissingDependency, issues[0].Code)
	require.Contains(t, issues[0].Message, "skill tone@2, which is archived")

	// An agent listing no skills pins none: its contract encodes as before.
	b, err := Canonical(AgentContract{Key: "a", Revision: 1, Hash: "h"})
	require.NoError(t, err)
	require.Equal(t, `{"archived":false,"hash":"h","key":"a","revision":1}`, string(b))
	require.Equal(t, []SkillRef{{"format", 1}, {"tone", 2}}, SkillRefs(c.Agents))
}
