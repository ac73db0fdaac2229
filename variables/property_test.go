package variables

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"
	"testing/quick"

	"github.com/stretchr/testify/require"
)

// templateAtoms are the pieces random templates are built from: every
// construct of the grammar and the fragments that break it.
var templateAtoms = []string{
	"{{", "}}", "{", "}", `\`, `\{{`, " ", "\t", "\n", ".", "a", "b", "B", "z9",
	"x.y", "_", "__proto__", "toString", "!", "é", "日本", "🌍", "\xff",
	"{{ a }}", "{{b}}", "{{ x.y }}", "{{ toString }}", "{{ bad key }}", "{{ }}",
}

// randomTemplate is a template built from templateAtoms.
type randomTemplate string

// Generate implements quick.Generator.
func (randomTemplate) Generate(r *rand.Rand, size int) reflect.Value {
	var b strings.Builder
	n := r.Intn(size + 1)
	for range n {
		if r.Intn(8) == 0 {
			b.WriteByte(byte(r.Intn(256)))
			continue
		}
		b.WriteString(templateAtoms[r.Intn(len(templateAtoms))])
	}
	return reflect.ValueOf(randomTemplate(b.String()))
}

// TestTokenizeRoundTripProperty checks, on random templates, that Tokenize's
// segments concatenate to the input and that Resolve, Extract and Tokenize
// agree (see assertRoundTrip for the exact invariants).
func TestTokenizeRoundTripProperty(t *testing.T) {
	t.Parallel()
	prop := func(tpl randomTemplate) bool {
		assertRoundTrip(t, string(tpl))
		return !t.Failed()
	}
	require.NoError(t, quick.Check(prop, &quick.Config{MaxCount: 5000, MaxCountScale: 0, Rand: rand.New(rand.NewSource(1))}))
}

// TestIsKeyMatchesPattern checks that the hand-written IsKey agrees with KeyPattern.
func TestIsKeyMatchesPattern(t *testing.T) {
	t.Parallel()
	prop := func(tpl randomTemplate) bool {
		s := string(tpl)
		return IsKey(s) == KeyPattern.MatchString(s)
	}
	require.NoError(t, quick.Check(prop, &quick.Config{MaxCount: 5000}))
	alphabet := "aZ9._-"
	r := rand.New(rand.NewSource(2))
	for range 20000 {
		var b strings.Builder
		for range r.Intn(8) {
			b.WriteByte(alphabet[r.Intn(len(alphabet))])
		}
		s := b.String()
		require.Equal(t, KeyPattern.MatchString(s), IsKey(s), "IsKey(%q) = %v disagrees with KeyPattern", s, IsKey(s))
	}
}

// FuzzTokenize checks for every input: no panic; Tokenize round-trips exactly
// with non-empty segments, no adjacent text segments and valid token keys;
// Resolve(t, nil, Keep) == strings.ReplaceAll(t, `\{{`, `{{`); Resolve with a
// token-looking value for every key renders exactly the segments (single
// pass); Extract equals the distinct token keys of Tokenize.
func FuzzTokenize(f *testing.F) {
	for _, s := range []string{
		"", "plain", "{{ a }}", "{{a}}", `\{{ a }}`, `\\{{ a }}`, "{{{ a }}}",
		"{{ {{ a }} }}", "{{ a", "{{ not a key! }}", "{{ __proto__ }}",
		"{{ toString }}", "héllo {{ context.user.displayName }} 🌍", "\xff{{a}}",
		"{{\ta\n}}", "}}{{", `\{{{`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, template string) {
		assertRoundTrip(t, template)
		_ = Validate(template, []Definition{{Key: "a", Label: "a", Kind: KindText, Scope: "s"}}, []string{})
		_ = Check(template, map[string]string{"b": "/in"}, nil)
	})
}
