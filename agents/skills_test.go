package agents_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/agents"
	"github.com/weftworks/weft/agents/provider"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/store"
)

func TestSkillContentRules(t *testing.T) {
	ok := agents.Skill{Name: " Tone ", Text: "Be brief.\n\n- no jargon\n"}.Normalize()
	require.Equal(t, "Tone", ok.Name)
	require.Empty(t, agents.ValidateSkill(ok, ""))
	h1, err := ok.Hash()
	require.NoError(t, err)
	h2, err := agents.Skill{Name: "Tone", Text: "Be brief.\n\n- no jargon\n"}.Hash()
	require.NoError(t, err)
	require.Equal(t, h1, h2, "the hash covers the normalized content")
	h3, _ := agents.Skill{Name: "Tone", Text: "Be brief."}.Hash()
	require.NotEqual(t, h1, h3)

	for name, s := range map[string]agents.Skill{
		"/name":        {Name: "", Text: "x"},
		"/text":        {Name: "n", Text: "   "},
		"/text bytes":  {Name: "n", Text: strings.Repeat("x", agents.MaxSkillTextBytes+1)},
		"/text ctrl":   {Name: "n", Text: "bell\x07"},
		"/name ctrl":   {Name: "two\nlines", Text: "x"},
		"/name length": {Name: strings.Repeat("n", agents.MaxSkillNameChars+1), Text: "x"},
	} {
		issues := agents.ValidateSkill(s, "")
		require.Len(t, issues, 1, name)
		require.Equal(t, strings.Fields(name)[0], issues[0].Path, name)
	}
}

func TestDefinitionSkillsAreValidatedInOrder(t *testing.T) {
	base := agents.Definition{Instructions: "Answer."}
	// Without skills a definition hashes as it did before skills existed.
	b, err := graph.Canonical(base.Normalize())
	require.NoError(t, err)
	require.NotContains(t, string(b), "skills")

	d := base
	d.Skills = []agents.SkillRef{{Key: " tone ", Revision: 2}, {Key: "format", Revision: 1}}
	d = d.Normalize()
	require.Equal(t, []agents.SkillRef{{Key: "tone", Revision: 2}, {Key: "format", Revision: 1}}, d.Skills, "order is the author's")
	swapped := base
	swapped.Skills = []agents.SkillRef{{Key: "format", Revision: 1}, {Key: "tone", Revision: 2}}
	h1, _ := d.Hash()
	h2, _ := swapped.Hash()
	require.NotEqual(t, h1, h2, "the order is content: it is the order texts are appended in")

	stored := map[agents.SkillRef]graph.SkillContract{
		{Key: "tone", Revision: 2}:   {Key: "tone", Revision: 2, Hash: "t"},
		{Key: "format", Revision: 1}: {Key: "format", Revision: 1, Hash: "f", Archived: true},
	}
	lookup := func(r agents.SkillRef) (graph.SkillContract, bool) { c, ok := stored[r]; return c, ok }
	bad := base
	bad.Skills = []agents.SkillRef{{Key: "tone", Revision: 2}, {Key: "format", Revision: 1}, {Key: "missing", Revision: 1},
		{Key: "Bad Key", Revision: 1}, {Key: "zero", Revision: 0}, {Key: "tone", Revision: 3}}
	got := map[string]string{}
	for _, is := range agents.Validate(bad.Normalize(), "/definition", agents.ValidateOptions{Skill: lookup}) {
		got[is.Path] = is.Code
	}
	require.Equal(t, map[string]string{
		"/definition/skills/1":          graph.CodeMissingDependency, // archived
		"/definition/skills/2":          graph.CodeMissingDependency, // not stored
		"/definition/skills/3/key":      agents.IssueInvalidField,
		"/definition/skills/4/revision": agents.IssueInvalidField,
		"/definition/skills/5/key":      agents.IssueInvalidField, // listed twice
	}, got)
	many := base
	for range agents.MaxAgentSkills + 1 {
		many.Skills = append(many.Skills, agents.SkillRef{Key: "s", Revision: 1})
	}
	issues := agents.Validate(many.Normalize(), "", agents.ValidateOptions{})
	require.Equal(t, "/skills", issues[0].Path)
	require.Equal(t, graph.CodeLimitExceeded, issues[0].Code)
}

// storeSkill stores skill key (revision 1) in the harness's tenant and
// returns its pin.
func (h *harness) storeSkill(key, text string) graph.PinnedSkill {
	h.t.Helper()
	s := agents.Skill{Name: key, Text: text}
	hash, err := s.Hash()
	require.NoError(h.t, err)
	_, _, err = h.st.CreateSkill(context.Background(), h.tenant, store.NewSkill{Key: key, Name: key, Text: text, Hash: hash, By: "alice"})
	require.NoError(h.t, err)
	return graph.PinnedSkill{Key: key, Revision: 1, Hash: hash}
}

func TestHarnessAppendsPinnedSkillsAndRefusesChangedOnes(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	tone := h.storeSkill("tone", "TONE")
	format := h.storeSkill("format", "FORMAT")
	a := h.agent("triage", agents.Definition{Instructions: "INSTRUCTIONS", Provider: "openai", Model: "m",
		Skills: []agents.SkillRef{{Key: "tone", Revision: 1}, {Key: "format", Revision: 1}}})
	a.Skills = []graph.PinnedSkill{tone, format}
	job := h.job(a)
	job.Toolset = &graph.Toolset{Tools: []string{}, Skill: "TOOLSET SKILL", Summary: "TOOLSET SUMMARY"}
	job.Decision = true
	h.prov.turns = []provider.Reply{final(`{"outcome":"pass"}`)}
	_, err := h.runtime().Run(context.Background(), job)
	require.NoError(t, err)
	tr := h.transcript()
	require.Equal(t, "INSTRUCTIONS\n\nTONE\n\nFORMAT\n\nTools: TOOLSET SUMMARY\n\nTOOLSET SKILL\n\n"+
		`Decide: answer with a JSON object whose "outcome" is "pass" or "fail".`, tr.Messages[0].Content)
	require.Equal(t, []string{"tone@1", "format@1"}, tr.Skills)
	require.Equal(t, tr.Messages[0].Content, h.prov.reqs[0].Messages[0].Content, "the model saw it")

	// A pin that does not match the stored revision refuses the attempt.
	h2 := newHarnessOn(t, h.st)
	h2.storeSkill("tone", "TONE")
	a2 := h2.agent("triage", agents.Definition{Instructions: "x", Skills: []agents.SkillRef{{Key: "tone", Revision: 1}}})
	a2.Skills = []graph.PinnedSkill{{Key: "tone", Revision: 1, Hash: strings.Repeat("0", 64)}}
	_, err = h2.runtime().Run(context.Background(), h2.job(a2))
	ae := appError(t, err)
	require.Equal(t, agents.ErrAgentUnavailable, ae.Type())
	require.True(t, ae.NonRetryable())
	require.Contains(t, ae.Error(), "skill revision tone@1 does not match the hash pinned")
	a2.Skills = nil
	_, err = h2.runtime().Run(context.Background(), h2.job(a2))
	require.Contains(t, appError(t, err).Error(), "skill tone@1 of agent triage is not pinned")
}

// probing is the scripted provider with a readiness probe against an
// endpoint that answers 503 while down.
type probing struct {
	*scripted
	url string
}

func (p probing) Probe(ctx context.Context) error {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return &provider.Error{Code: provider.CodeUnavailable, Message: err.Error()}
	}
	_ = resp.Body.Close()
	if resp.StatusCode >= 500 {
		return &provider.Error{Code: provider.CodeUnavailable, Message: resp.Status}
	}
	return nil
}

func TestHarnessStopsAtOnceWhileTheProviderIsKnownDown(t *testing.T) {
	t.Parallel()
	h := newHarness(t)
	var down atomic.Bool
	down.Store(true)
	endpoint := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		if down.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer endpoint.Close()
	p := probing{scripted: h.prov, url: endpoint.URL}
	ready := provider.NewReadiness([]provider.Provider{p}, provider.ReadinessOptions{})
	rt, err := agents.New(agents.Deps{Store: h.st, Actions: h.reg, Providers: []provider.Provider{p}, Readiness: ready})
	require.NoError(t, err)
	a := h.agent("triage", agents.Definition{Instructions: "x", Provider: "openai", Model: "m"})
	h.prov.turns = []provider.Reply{final(`{"ok":true}`)}

	_, err = rt.Run(context.Background(), h.job(a))
	ae := appError(t, err)
	require.Equal(t, provider.CodeUnavailable, ae.Type(), "an infrastructure fault, re-dispatched without spending the attempt")
	require.False(t, ae.NonRetryable())
	require.Contains(t, ae.Error(), "readiness probe")
	require.Zero(t, h.prov.asked.Load(), "no model call while the provider is known down")

	// A probe verdict of up lets the same attempt run (Observe stands in for
	// the probe the TTL would allow).
	down.Store(false)
	ready.Observe(provider.NameOpenAI, nil)
	res, err := rt.Run(context.Background(), h.job(a))
	require.NoError(t, err)
	require.JSONEq(t, `{"ok":true}`, string(res.Output))
	require.Equal(t, int32(1), h.prov.asked.Load())
}
