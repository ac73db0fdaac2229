package graph

import (
	"encoding/json"
	"math"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

// canonicalStrings covers every escape class RFC 8785 distinguishes.
func canonicalStrings() []string {
	var all strings.Builder
	for c := 0; c < 0x80; c++ {
		all.WriteByte(byte(c))
	}
	return []string{"", "plain", all.String(), "quote\" back\\ \b\f\n\r\t \x00 \x1f \x7f <>& \u2028\u2029 é 😀 \ue000 \uffff",
		"\U0010ffff", "a\x00b", strings.Repeat("é", 40)}
}

func TestAppendCanonicalStringIsCanonical(t *testing.T) {
	for _, s := range canonicalStrings() {
		want, err := Canonical(s)
		require.NoError(t, err)
		got, ok := AppendCanonicalString([]byte("prefix"), s)
		require.True(t, ok, "%q", s)
		require.Equal(t, "prefix"+string(want), string(got), "%q", s)
	}
	for _, bad := range []string{"\xff", "a\xc3", "\xed\xa0\x80"} { // invalid UTF-8, a surrogate encoded
		got, ok := AppendCanonicalString([]byte("x"), bad)
		require.False(t, ok, "%q", bad)
		require.Equal(t, "x", string(got), "nothing is appended for %q", bad)
	}
}

func TestAppendCanonicalIntIsCanonical(t *testing.T) {
	for _, n := range []int64{0, 1, -1, 42, 1e15, -1e15, 1 << 53, -(1 << 53), 1<<53 + 1, -(1<<53 + 1), 123456789012345678, math.MaxInt64, math.MinInt64} {
		want, err := Canonical(n)
		require.NoError(t, err)
		require.Equal(t, string(want), string(AppendCanonicalInt(nil, n)), "%d", n)
	}
}

func TestAppendCanonicalNumberIsCanonical(t *testing.T) {
	for _, lit := range []string{"0", "-0", "7", "-7", "10", "999999999999999", "-999999999999999", "1000000000000000",
		"9007199254740993", "123456789012345678", "1.50", "-0.0", "0.1", "1e-7", "1E21", "12e2", "1e308", "5e-324", "-1.5e-10"} {
		want, err := Canonical(json.Number(lit))
		require.NoError(t, err, lit)
		got, err := AppendCanonicalNumber([]byte("["), lit)
		require.NoError(t, err, lit)
		require.Equal(t, "["+string(want), string(got), lit)
	}
	for _, bad := range []string{"1e400", "-1e400", "x", "01"} {
		_, want := Canonical(json.Number(bad))
		_, err := AppendCanonicalNumber(nil, bad)
		require.Error(t, want, bad)
		require.Error(t, err, bad)
	}
}

func TestCompareCanonicalKeysSortsAsCanonical(t *testing.T) {
	keys := []string{"", "a", "A", "b", "aa", "é", "e\u0301", "\ue000", "\uffff", "😀", "😁", "\U00010000", "\U0010ffff", "𝄞",
		"\u007f", "\u0080", "ab", "a\x00", "z😀", "z\ue000", "€"}
	obj := map[string]int{}
	for i, k := range keys {
		obj[k] = i
	}
	c, err := Canonical(obj)
	require.NoError(t, err)
	var pairs []string // the canonical member order, as JSON member names
	dec := json.NewDecoder(strings.NewReader(string(c)))
	_, _ = dec.Token()
	for dec.More() {
		tok, err := dec.Token()
		require.NoError(t, err)
		pairs = append(pairs, tok.(string))
		_, err = dec.Token()
		require.NoError(t, err)
	}
	sorted := slices.Clone(keys)
	slices.SortFunc(sorted, CompareCanonicalKeys)
	require.Equal(t, pairs, sorted)
	for _, k := range keys {
		require.Zero(t, CompareCanonicalKeys(k, k), "%q", k)
	}
	bytesSorted := slices.Clone(keys)
	slices.SortFunc(bytesSorted, func(a, b string) int { return CompareCanonicalKeyBytes([]byte(a), []byte(b)) })
	require.Equal(t, pairs, bytesSorted)
	for _, a := range keys {
		for _, b := range keys {
			require.Equal(t, sign(CompareCanonicalKeys(a, b)), sign(CompareCanonicalKeyBytes([]byte(a), []byte(b))), "%q %q", a, b)
		}
	}
}

// FuzzAppendCanonical checks the Append functions against Canonical on
// arbitrary strings, integers and number literals, and the key order on
// arbitrary pairs.
func FuzzAppendCanonical(f *testing.F) {
	f.Add("a\x00\"é😀\ue000", "b", int64(1<<53+1), "1.50")
	f.Add("\xff", "", int64(-1), "-0")
	f.Fuzz(func(t *testing.T, s, s2 string, n int64, lit string) {
		got, ok := AppendCanonicalString(nil, s)
		if want, err := Canonical(s); ok {
			require.NoError(t, err)
			require.Equal(t, string(want), string(got), "%q", s)
		}
		want, err := Canonical(n)
		require.NoError(t, err)
		require.Equal(t, string(want), string(AppendCanonicalInt(nil, n)))
		if dec := json.NewDecoder(strings.NewReader(lit)); true {
			dec.UseNumber()
			var v any
			if dec.Decode(&v) == nil && !dec.More() {
				if num, isNum := v.(json.Number); isNum {
					want, werr := Canonical(num)
					got, gerr := AppendCanonicalNumber(nil, string(num))
					require.Equal(t, werr == nil, gerr == nil, "%q: %v / %v", num, werr, gerr)
					if werr == nil {
						require.Equal(t, string(want), string(got), "%q", num)
					}
					gotBytes, berr := AppendCanonicalNumber(nil, []byte(num))
					require.Equal(t, gerr == nil, berr == nil, "%q: %v / %v", num, gerr, berr)
					require.Equal(t, string(got), string(gotBytes), "%q", num)
				}
			}
		}
		if !utf8.ValidString(s) || !utf8.ValidString(s2) || s == s2 {
			return
		}
		c, err := Canonical(map[string]int{s: 0, s2: 1})
		require.NoError(t, err)
		first := s
		if CompareCanonicalKeys(s, s2) > 0 {
			first = s2
		}
		prefix, _ := AppendCanonicalString([]byte("{"), first)
		require.True(t, strings.HasPrefix(string(c), string(prefix)+":"), "%s does not start with %q", c, first)
		require.Equal(t, -sign(CompareCanonicalKeys(s, s2)), sign(CompareCanonicalKeys(s2, s)))
		require.Equal(t, sign(CompareCanonicalKeys(s, s2)), sign(CompareCanonicalKeyBytes([]byte(s), []byte(s2))), "%q %q", s, s2)
	})
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
