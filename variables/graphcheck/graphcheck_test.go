package graphcheck_test

import (
	"os"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/graph"
	"github.com/weftworks/weft/publication"
	"github.com/weftworks/weft/variables"
	"github.com/weftworks/weft/variables/graphcheck"
)

// titlePath is where graph reports issues of the quickstart's "title"
// template: node "save" is /nodes/2.
const titlePath = "/nodes/2/mapping/title/template"

func registry(t *testing.T) *variables.Registry {
	t.Helper()
	reg, err := variables.Builtin(variables.NoAgents{})
	require.NoError(t, err)
	return reg
}

// quickstart decodes examples/quickstart.json and replaces the "title"
// mapping of node "save" with template and bindings.
func quickstart(t *testing.T, template string, bindings map[string]string) *graph.Document {
	t.Helper()
	raw, err := os.ReadFile("../../examples/quickstart.json")
	require.NoError(t, err)
	doc, err := graph.Decode(raw)
	require.NoError(t, err)
	require.Equal(t, "save", doc.Nodes[2].ID)
	doc.Nodes[2].Mapping["title"] = graph.Mapping{Template: &template, Bindings: bindings}
	return doc
}

func builtinCatalog() graph.Catalog { return graph.NewStaticCatalog(catalog.BuiltinContracts(), nil) }

func TestTemplateIssuesThroughGraphValidation(t *testing.T) {
	reg := registry(t)
	agentBinding := map[string]string{"agentId": "/in/id"}
	cases := []struct {
		name     string
		template string
		bindings map[string]string
		checker  *graphcheck.Checker // nil: graphcheck.New(reg)
		// want lists the expected issues as "CODE path"; every message must
		// contain the matching entry of msgs.
		want  []string
		msgs  []string
		perms []string // NodePermissions["save"] when valid
	}{
		{name: "explicitly bound key is known", template: "Item {{ item.id }}",
			bindings: map[string]string{"item.id": "/in/id"}, perms: []string{"notes.write"}},
		{name: "context variables are known and scope-less",
			template: "{{ context.user.displayName }} on {{ context.today }} for {{ context.tenantName }} <{{context.user.email}}>",
			perms:    []string{"notes.write"}},
		{name: "run variables are known", template: "{{ workflow.key }}/{{ run.id }}", perms: []string{"notes.write"}},
		{name: "escaped braces are literal text", template: `\{{ nope }}`, perms: []string{"notes.write"}},
		{name: "unknown variable", template: "Hi {{ nope.key }}",
			want: []string{"UNKNOWN_VARIABLE " + titlePath}, msgs: []string{`unknown variable "nope.key"`}},
		{name: "a binding pointer does not make other keys known", template: "{{ item.id }} {{ item.name }}",
			bindings: map[string]string{"item.id": "/in/id"},
			want:     []string{"UNKNOWN_VARIABLE " + titlePath}, msgs: []string{`"item.name"`}},
		{name: "every unknown key once, first-seen order", template: "{{ b }}{{ a }}{{ b }}{{ Not A Key }}",
			want: []string{"UNKNOWN_VARIABLE " + titlePath, "UNKNOWN_VARIABLE " + titlePath, "UNKNOWN_VARIABLE " + titlePath},
			msgs: []string{`"b"`, `"a"`, "{{ Not A Key }} is not a variable key"}},
		{name: "invalid token", template: "{{ __proto__ }}",
			want: []string{"UNKNOWN_VARIABLE " + titlePath}, msgs: []string{"is not a variable key"}},
		{name: "agent.name without its agentId binding", template: "Agent {{ agent.name }}",
			want: []string{"UNKNOWN_VARIABLE " + titlePath}, msgs: []string{`"agent.name" needs binding "agentId"`}},
		{name: "agent.name with agentId bound needs agents.read", template: "Agent {{ agent.name }}",
			bindings: agentBinding, perms: []string{"agents.read", "notes.write"}},
		{name: "agent.name bound explicitly needs no scope and no agentId", template: "Agent {{ agent.name }}",
			bindings: map[string]string{"agent.name": "/in/id"}, perms: []string{"notes.write"}},
		{name: "forbidden for a publisher without agents.read", template: "Agent {{ agent.name }}",
			bindings: agentBinding, checker: graphcheck.New(reg).ForScopes([]string{"workflows.publish"}),
			want: []string{"UNKNOWN_VARIABLE " + titlePath}, msgs: []string{`needs scope "agents.read"`}},
		{name: "allowed for a publisher with agents.read", template: "Agent {{ agent.name }}",
			bindings: agentBinding, checker: graphcheck.New(reg).ForScopes([]string{"agents.read"}),
			perms: []string{"agents.read", "notes.write"}},
		{name: "scope-less variables need no scope even for a scoped checker", template: "{{ context.today }}",
			checker: graphcheck.New(reg).ForScopes(nil), perms: []string{"notes.write"}},
		{name: "template over 8,000 characters", template: strings.Repeat("é", graph.DefaultLimits.MaxTemplateChars+1),
			want: []string{"LIMIT_EXCEEDED " + titlePath}, msgs: []string{"the limit is 8000"}},
		{name: "template of exactly 8,000 characters", template: strings.Repeat("é", graph.DefaultLimits.MaxTemplateChars),
			perms: []string{"notes.write"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checker := tc.checker
			if checker == nil {
				checker = graphcheck.New(reg)
			}
			opts := graph.Options{Templates: checker}
			doc := quickstart(t, tc.template, tc.bindings)
			issues := graph.ValidateWith(doc, builtinCatalog(), opts)
			got := make([]string, 0, len(issues))
			for _, is := range issues {
				got = append(got, is.Code+" "+is.Path)
			}
			if tc.want == nil {
				tc.want = []string{}
			}
			require.Equal(t, tc.want, got, "issues: %+v", issues)
			for i, m := range tc.msgs {
				require.Contains(t, issues[i].Message, m)
			}

			compiled, cissues := graph.CompileWith(doc, builtinCatalog(), opts)
			dry := graph.DryRunWith(doc, builtinCatalog(), opts)
			require.Equal(t, len(tc.want) == 0, dry.Valid)
			if len(tc.want) > 0 {
				require.Nil(t, compiled)
				require.Equal(t, issues, cissues)
				return
			}
			require.Empty(t, cissues)
			require.Equal(t, tc.perms, compiled.NodePermissions["save"])
			require.Equal(t, tc.perms, compiled.Permissions)
			require.Equal(t, tc.perms, dry.Permissions)
			// The compiled revision keeps the raw template, never resolved text.
			body, ok := compiled.NodeBody("save")
			require.True(t, ok)
			require.Equal(t, tc.template, *body.Mapping["title"].Template)
		})
	}
}

// A dry-run with issues still shows the scopes templates need.
func TestDryRunReportsTemplateScopesDespiteIssues(t *testing.T) {
	reg := registry(t)
	doc := quickstart(t, "{{ agent.name }} {{ nope }}", map[string]string{"agentId": "/in/id"})
	dry := graph.DryRunWith(doc, builtinCatalog(), graph.Options{Templates: graphcheck.New(reg)})
	require.False(t, dry.Valid)
	require.Len(t, dry.Issues, 1)
	require.Equal(t, graph.Issue{Code: graph.CodeUnknownVariable, Path: titlePath,
		Message: dry.Issues[0].Message}, dry.Issues[0])
	require.Contains(t, dry.Permissions, variables.ScopeAgentsRead)
}

// The same checker through the catalog resolver, as publication wires it.
func TestResolverOptionsUseTheChecker(t *testing.T) {
	r := &publication.Resolver{Templates: graphcheck.New(registry(t))}
	doc := quickstart(t, "{{ nope }}", nil)
	issues := graph.ValidateWith(doc, builtinCatalog(), r.Options())
	require.Len(t, issues, 1)
	require.Equal(t, graph.CodeUnknownVariable, issues[0].Code)
	require.Equal(t, titlePath, issues[0].Path)
}

func TestCheckTemplateDirect(t *testing.T) {
	c := graphcheck.New(registry(t))

	scopes, issues := c.CheckTemplate("", nil)
	require.Equal(t, []string{}, scopes)
	require.Equal(t, []graph.Issue{}, issues)

	// Over the limit: one LIMIT_EXCEEDED, nothing else is scanned.
	scopes, issues = c.CheckTemplate(strings.Repeat("{{ x }}", 2000), nil)
	require.Equal(t, []string{}, scopes)
	require.Len(t, issues, 1)
	require.Equal(t, graph.CodeLimitExceeded, issues[0].Code)
	require.Empty(t, issues[0].Path)

	// Issues are template-relative (empty Path) and scopes come back with them.
	scopes, issues = c.CheckTemplate("{{ agent.name }} {{ agent.name }} {{ zzz }}", map[string]string{"agentId": "/in/a"})
	require.Equal(t, []string{variables.ScopeAgentsRead}, scopes)
	require.Len(t, issues, 1)
	require.Equal(t, graph.CodeUnknownVariable, issues[0].Code)
	require.Empty(t, issues[0].Path)

	// Unknown keys come first, then unusable registered keys, each once.
	_, issues = c.CheckTemplate("{{ agent.name }}{{ a }}{{ agent.name }}", nil)
	require.Len(t, issues, 2)
	require.Contains(t, issues[0].Message, `"a"`)
	require.Contains(t, issues[1].Message, `"agent.name" needs binding "agentId"`)

	require.Panics(t, func() { graphcheck.New(nil) })
}

// ForScopes copies the scopes: the caller's slice may change afterwards.
func TestForScopesCopiesScopes(t *testing.T) {
	scopes := []string{variables.ScopeAgentsRead}
	c := graphcheck.New(registry(t)).ForScopes(scopes)
	scopes[0] = "other"
	_, issues := c.CheckTemplate("{{ agent.name }}", map[string]string{"agentId": "/in/a"})
	require.Empty(t, issues)
}
