package variables

import (
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestIsKey(t *testing.T) {
	t.Parallel()
	cases := []struct {
		key  string
		want bool
	}{
		{"a", true},
		{"context.user.displayName", true},
		{"run.id", true},
		{"item2.v10", true},
		{"toString", true},
		{"constructor", true},
		{"agentId", true},
		{"", false},
		{"__proto__", false},
		{"_a", false},
		{"Foo", false},
		{"a.B", false},
		{"1a", false},
		{"a.", false},
		{".a", false},
		{"a..b", false},
		{"a-b", false},
		{"a b", false},
		{"a_b", false},
		{"café", false},
		{"ａ", false}, // fullwidth a
		{"a\n", false},
	}
	for _, c := range cases {
		got := IsKey(c.key)
		assert.Equal(t, c.want, got, "IsKey(%q) = %v, want %v", c.key, got, c.want)
		got = KeyPattern.MatchString(c.key)
		assert.Equal(t, c.want, got, "KeyPattern.MatchString(%q) = %v, want %v", c.key, got, c.want)
	}
}

func TestResolve(t *testing.T) {
	t.Parallel()
	values := map[string]string{
		"a":                        "A",
		"b":                        "B",
		"context.user.displayName": "Ada",
		"loop":                     "{{ a }}",
		"esc":                      `\{{ a }}`,
		"uni":                      "héllo 🌍",
		"empty":                    "",
	}
	cases := []struct {
		name, template    string
		values            map[string]string
		keep, blank       string // expected with Keep and with Blank
		keysWant          []string
		unknownWithValues []string // Validate against definitions of values' keys
	}{
		{name: "empty", template: "", keep: "", blank: "", keysWant: []string{}},
		{name: "plain text", template: "hello world", keep: "hello world", blank: "hello world", keysWant: []string{}},
		{name: "token no spaces", template: "x{{a}}y", keep: "xAy", blank: "xAy", keysWant: []string{"a"}},
		{name: "token spaces", template: "x{{ a }}y", keep: "xAy", blank: "xAy", keysWant: []string{"a"}},
		{name: "token uneven spaces", template: "{{a   }}{{   b}}", keep: "AB", blank: "AB", keysWant: []string{"a", "b"}},
		{name: "tabs and newlines", template: "{{\ta\n}}{{\r\nb }}", keep: "AB", blank: "AB", keysWant: []string{"a", "b"}},
		{name: "dot path", template: "Hi {{ context.user.displayName }}!", keep: "Hi Ada!", blank: "Hi Ada!", keysWant: []string{"context.user.displayName"}},
		{name: "missing keep and blank", template: "a{{ missing }}b", keep: "a{{ missing }}b", blank: "ab", keysWant: []string{"missing"}, unknownWithValues: []string{"missing"}},
		{name: "missing keeps exact spacing", template: "{{missing   }}", keep: "{{missing   }}", blank: "", keysWant: []string{"missing"}, unknownWithValues: []string{"missing"}},
		{name: "empty value is a value", template: "[{{ empty }}]", keep: "[]", blank: "[]", keysWant: []string{"empty"}},
		{name: "repeated key", template: "{{a}}{{ a }}{{b}}{{a}}", keep: "AABA", blank: "AABA", keysWant: []string{"a", "b"}},
		{name: "value that looks like a token is verbatim", template: "{{ loop }}", keep: "{{ a }}", blank: "{{ a }}", keysWant: []string{"loop"}},
		{name: "value with escape is verbatim", template: "{{ esc }}", keep: `\{{ a }}`, blank: `\{{ a }}`, keysWant: []string{"esc"}},
		{name: "escape", template: `\{{ a }}`, keep: "{{ a }}", blank: "{{ a }}", keysWant: []string{}},
		{name: "escape then token", template: `\{{ a }} {{ a }}`, keep: "{{ a }} A", blank: "{{ a }} A", keysWant: []string{"a"}},
		{name: "escape without token", template: `\{{`, keep: "{{", blank: "{{", keysWant: []string{}},
		{name: "double backslash", template: `\\{{ a }}`, keep: `\{{ a }}`, blank: `\{{ a }}`, keysWant: []string{}},
		{name: "backslash elsewhere literal", template: `a\b\{x {{a}}\`, keep: `a\b\{x A\`, blank: `a\b\{x A\`, keysWant: []string{"a"}},
		{name: "escape three braces", template: `\{{{ a }}}`, keep: "{{{ a }}}", blank: "{{{ a }}}", keysWant: []string{}},
		{name: "single braces literal", template: "{a} {{a} {a}}", keep: "{a} {{a} {a}}", blank: "{a} {{a} {a}}", keysWant: []string{}},
		{name: "unterminated", template: "x {{ a", keep: "x {{ a", blank: "x {{ a", keysWant: []string{}},
		{name: "unterminated single close", template: "{{ a }", keep: "{{ a }", blank: "{{ a }", keysWant: []string{}},
		{name: "unterminated then token", template: "{{ a {{ b }}", keep: "{{ a B", blank: "{{ a B", keysWant: []string{"b"}},
		{name: "only close braces", template: "}} a }}", keep: "}} a }}", blank: "}} a }}", keysWant: []string{}},
		{name: "triple braces", template: "{{{ a }}}", keep: "{A}", blank: "{A}", keysWant: []string{"a"}},
		{name: "nested braces innermost wins", template: "{{ {{ a }} }}", keep: "{{ A }}", blank: "{{ A }}", keysWant: []string{"a"}},
		{name: "nested missing", template: "{{ {{ missing }} }}", keep: "{{ {{ missing }} }}", blank: "{{  }}", keysWant: []string{"missing"}, unknownWithValues: []string{"missing"}},
		{name: "brace inside content", template: "{{ a}b }}", keep: "{{ a}b }}", blank: "{{ a}b }}", keysWant: []string{}},
		{name: "invalid content literal", template: "{{ not a key! }}", keep: "{{ not a key! }}", blank: "{{ not a key! }}", keysWant: []string{}, unknownWithValues: []string{"not a key!"}},
		{name: "empty braces", template: "{{}}{{  }}", keep: "{{}}{{  }}", blank: "{{}}{{  }}", keysWant: []string{}, unknownWithValues: []string{""}},
		{name: "uppercase start invalid", template: "{{ Foo }}", keep: "{{ Foo }}", blank: "{{ Foo }}", keysWant: []string{}, unknownWithValues: []string{"Foo"}},
		{name: "proto invalid key", template: "{{ __proto__ }}", keep: "{{ __proto__ }}", blank: "{{ __proto__ }}", keysWant: []string{}, unknownWithValues: []string{"__proto__"}},
		{name: "toString not implicit", template: "{{ toString }}", keep: "{{ toString }}", blank: "", keysWant: []string{"toString"}, unknownWithValues: []string{"toString"}},
		{name: "constructor not implicit", template: "{{constructor}}", keep: "{{constructor}}", blank: "", keysWant: []string{"constructor"}, unknownWithValues: []string{"constructor"}},
		{name: "toString explicit", template: "{{ toString }}", values: map[string]string{"toString": "ts"}, keep: "ts", blank: "ts", keysWant: []string{"toString"}},
		{name: "hasOwnProperty not implicit", template: "{{ hasOwnProperty }}", keep: "{{ hasOwnProperty }}", blank: "", keysWant: []string{"hasOwnProperty"}, unknownWithValues: []string{"hasOwnProperty"}},
		{name: "unicode text around tokens", template: "héllo {{ a }} — 日本 🌍", keep: "héllo A — 日本 🌍", blank: "héllo A — 日本 🌍", keysWant: []string{"a"}},
		{name: "unicode value", template: "[{{ uni }}]", keep: "[héllo 🌍]", blank: "[héllo 🌍]", keysWant: []string{"uni"}},
		{name: "unicode key invalid", template: "{{ café }}", keep: "{{ café }}", blank: "{{ café }}", keysWant: []string{}, unknownWithValues: []string{"café"}},
		{name: "fullwidth braces literal", template: "｛｛ a ｝｝", keep: "｛｛ a ｝｝", blank: "｛｛ a ｝｝", keysWant: []string{}},
		{name: "nbsp is not inner space", template: "{{\u00a0a}}", keep: "{{\u00a0a}}", blank: "{{\u00a0a}}", keysWant: []string{}, unknownWithValues: []string{"\u00a0a"}},
		{name: "invalid utf8 preserved", template: "\xff{{a}}\xfe", keep: "\xffA\xfe", blank: "\xffA\xfe", keysWant: []string{"a"}},
		{name: "no expressions", template: "{{ a + b }}{{ a | upper }}", keep: "{{ a + b }}{{ a | upper }}", blank: "{{ a + b }}{{ a | upper }}", keysWant: []string{}, unknownWithValues: []string{"a + b", "a | upper"}},
		{name: "dot edge cases invalid", template: "{{ .a }}{{ a. }}{{ a..b }}", keep: "{{ .a }}{{ a. }}{{ a..b }}", blank: "{{ .a }}{{ a. }}{{ a..b }}", keysWant: []string{}, unknownWithValues: []string{".a", "a.", "a..b"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			vals := values
			if c.values != nil {
				vals = c.values
			}
			got := Resolve(c.template, vals, Keep)
			assert.Equal(t, c.keep, got, "Resolve(Keep) = %q, want %q", got, c.keep)
			got = Resolve(c.template, vals, Blank)
			assert.Equal(t, c.blank, got, "Resolve(Blank) = %q, want %q", got, c.blank)
			keys := Extract(c.template)
			assert.Equal(t, c.keysWant, keys, "Extract = %q, want %q", keys, c.keysWant)
			var defs []Definition
			for k := range vals {
				defs = append(defs, Definition{Key: k, Label: k, Kind: KindText})
			}
			res := Validate(c.template, defs, nil)
			want := c.unknownWithValues
			if want == nil {
				want = []string{}
			}
			assert.Equal(t, want, res.Unknown, "Validate.Unknown = %q, want %q", res.Unknown, want)
			assert.Empty(t, res.Forbidden, "Validate.Forbidden = %q, want none (scope check skipped)", res.Forbidden)
			assertRoundTrip(t, c.template)
		})
	}
}

func TestResolveNilValues(t *testing.T) {
	t.Parallel()
	got := Resolve("{{ a }}", nil, Keep)
	assert.Equal(t, "{{ a }}", got, "Keep with nil values = %q", got)
	got = Resolve("x{{ a }}y", nil, Blank)
	assert.Equal(t, "xy", got, "Blank with nil values = %q", got)
}

func TestResolveSinglePass(t *testing.T) {
	t.Parallel()
	// Each value names the next key; a recursive resolver would chase the chain.
	values := map[string]string{"a": "{{ b }}", "b": "{{ c }}", "c": "done"}
	got := Resolve("{{ a }}", values, Keep)
	require.Equal(t, "{{ b }}", got, "got %q, want the value verbatim", got)
	// A value that completes a token with surrounding text is not re-scanned either.
	got = Resolve("{{open}} c {{close}}", map[string]string{"open": "{{", "close": "}}", "c": "X"}, Keep)
	require.Equal(t, "{{ c }}", got, "got %q, want the pieces verbatim", got)
}

func TestTokenize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		template string
		want     []Segment
	}{
		{"", []Segment{}},
		{"plain", []Segment{{Kind: SegmentText, Text: "plain"}}},
		{"Hi {{ user.name }}!", []Segment{
			{Kind: SegmentText, Text: "Hi "},
			{Kind: SegmentToken, Text: "{{ user.name }}", Key: "user.name"},
			{Kind: SegmentText, Text: "!"},
		}},
		{`a\{{ b }}{{c}}`, []Segment{
			{Kind: SegmentText, Text: "a"},
			{Kind: SegmentEscape, Text: `\{{`},
			{Kind: SegmentText, Text: " b }}"},
			{Kind: SegmentToken, Text: "{{c}}", Key: "c"},
		}},
		{"{{{ a }}}", []Segment{
			{Kind: SegmentText, Text: "{"},
			{Kind: SegmentToken, Text: "{{ a }}", Key: "a"},
			{Kind: SegmentText, Text: "}"},
		}},
		{"x{{ not a key! }}y", []Segment{
			{Kind: SegmentText, Text: "x"},
			{Kind: SegmentInvalid, Text: "{{ not a key! }}"},
			{Kind: SegmentText, Text: "y"},
		}},
		{"{{ a", []Segment{{Kind: SegmentText, Text: "{{ a"}}},
		{"{a}{{b}}", []Segment{
			{Kind: SegmentText, Text: "{a}"},
			{Kind: SegmentToken, Text: "{{b}}", Key: "b"},
		}},
	}
	for _, c := range cases {
		got := Tokenize(c.template)
		assert.Equal(t, c.want, got, "Tokenize(%q) = %+v, want %+v", c.template, got, c.want)
	}
}

func TestValidateScopes(t *testing.T) {
	t.Parallel()
	defs := []Definition{
		{Key: "context.today", Label: "Today", Kind: KindDate},
		{Key: "agent.name", Label: "Agent", Kind: KindText, Scope: "agents.read"},
		{Key: "party.name", Label: "Party", Kind: KindText, Scope: "parties.read"},
	}
	tpl := "{{ party.name }} {{ nope }} {{ agent.name }} {{ context.today }} {{ Bad }} {{ agent.name }}"
	cases := []struct {
		name      string
		scopes    []string
		forbidden []string
	}{
		{"nil skips the scope check", nil, []string{}},
		{"empty holds no scope", []string{}, []string{"party.name", "agent.name"}},
		{"partial", []string{"agents.read"}, []string{"party.name"}},
		{"all", []string{"agents.read", "parties.read"}, []string{}},
	}
	for _, c := range cases {
		res := Validate(tpl, defs, c.scopes)
		assert.Equal(t, []string{"nope", "Bad"}, res.Unknown, "%s: Unknown = %q", c.name, res.Unknown)
		assert.Equal(t, c.forbidden, res.Forbidden, "%s: Forbidden = %q, want %q", c.name, res.Forbidden, c.forbidden)
		assert.False(t, res.OK(), "%s: OK() with unknown keys", c.name)
	}
	assert.True(t, Validate("{{ context.today }}", defs, []string{}).OK(), "a scope-less variable must validate without scopes")
}

// assertRoundTrip checks the invariants that hold for every template.
func assertRoundTrip(t *testing.T, template string) {
	t.Helper()
	segs := Tokenize(template)
	var b strings.Builder
	values := map[string]string{}
	var rendered strings.Builder
	var keys []string
	for i, s := range segs {
		b.WriteString(s.Text)
		require.NotEmpty(t, s.Text, "Tokenize(%q): empty segment %d", template, i)
		switch s.Kind {
		case SegmentText:
			require.False(t, i > 0 && segs[i-1].Kind == SegmentText, "Tokenize(%q): adjacent text segments at %d", template, i)
			require.Empty(t, s.Key, "Tokenize(%q): text segment with key", template)
			rendered.WriteString(s.Text)
		case SegmentToken:
			require.True(t, IsKey(s.Key), "Tokenize(%q): token key %q is not a key", template, s.Key)
			// A value that is itself a token must come back verbatim.
			v := "{{ " + s.Key + " }}<" + s.Key + ">"
			values[s.Key] = v
			rendered.WriteString(v)
			keys = appendDistinct(keys, s.Key)
		case SegmentEscape:
			require.Equal(t, `\{{`, s.Text, "Tokenize(%q): escape text %q", template, s.Text)
			rendered.WriteString("{{")
		case SegmentInvalid:
			rendered.WriteString(s.Text)
		default:
			t.Fatalf("Tokenize(%q): unknown kind %q", template, s.Kind)
		}
	}
	require.Equal(t, template, b.String(), "Tokenize(%q) does not round-trip: %q", template, b.String())
	got, want := Resolve(template, nil, Keep), strings.ReplaceAll(template, `\{{`, `{{`)
	require.Equal(t, want, got, "Resolve(%q, nil, Keep) = %q, want %q", template, got, want)
	got = Resolve(template, values, Blank)
	require.Equal(t, rendered.String(), got, "Resolve(%q, values) = %q, want %q", template, got, rendered.String())
	if keys == nil {
		keys = []string{}
	}
	extracted := Extract(template)
	require.Equal(t, keys, extracted, "Extract(%q) = %q, want %q", template, extracted, keys)
}

// TestLargeTemplate checks that a template with very many distinct keys is
// handled in linear time (a quadratic dedup would take seconds here).
func TestLargeTemplate(t *testing.T) {
	t.Parallel()
	const n = 100000
	var b strings.Builder
	values := make(map[string]string, n)
	var defs []Definition
	for i := range n {
		k := "k" + strconv.Itoa(i)
		b.WriteString("{{" + k + "}} {{ bad" + strconv.Itoa(i) + "! }}")
		values[k] = "v"
		defs = append(defs, Definition{Key: k, Label: k, Kind: KindText})
	}
	tpl := b.String()
	got := len(Extract(tpl))
	require.Equal(t, n, got, "Extract found %d keys", got)
	res := Validate(tpl, defs, []string{})
	require.Len(t, res.Unknown, n, "Validate: %d unknown, %d forbidden", len(res.Unknown), len(res.Forbidden))
	require.Empty(t, res.Forbidden, "Validate: %d unknown, %d forbidden", len(res.Unknown), len(res.Forbidden))
	got = len(Check(tpl, values, nil))
	require.Equal(t, n, got, "Check found %d unknown", got)
	reg, err := NewRegistry()
	require.NoError(t, err)
	_, err = reg.Resolve(t.Context(), tpl, Request{Values: values})
	var r *Refusal
	require.ErrorAs(t, err, &r, "Registry.Resolve: %v", err)
	require.Equal(t, CodeUnknownVariable, r.Code, "Registry.Resolve: %v", err)
	require.Len(t, r.Keys, n, "Registry.Resolve: %v", err)
	require.Equal(t, n, strings.Count(Resolve(tpl, values, Blank), "v"), "Resolve lost values")
}
