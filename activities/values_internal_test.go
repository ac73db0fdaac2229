package activities

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/graph"
)

// TestValidateOpenSchema checks that a schema accepting everything (`{}`,
// `true`) gives validate's verdict without the schema library exactly as
// the library gives it: nothing for any JSON value, the same error for
// anything that is not one JSON value.
func TestValidateOpenSchema(t *testing.T) {
	rev := newRevision(revisionKey{"t", "c"}, &graph.Compiled{})
	for _, doc := range []string{`{}`, ` {} `, `true`, "\ttrue\n"} {
		open, err := rev.schema("open:"+doc, func() (json.RawMessage, error) { return json.RawMessage(doc), nil })
		require.NoError(t, err)
		require.True(t, open.open, "%q accepts every value", doc)
		full := &schema{compiled: open.compiled}
		for _, v := range []string{`{"text":"hello","n":42}`, `null`, `1e400`, ` [1, "\ud800", {"a":{}}] `, `"x"`,
			``, ` `, `{"a":1} {"b":2}`, `{"a":`, `[1,]`, `nul`, "\"\xff\""} {
			wantErrs, wantErr := validate(full, json.RawMessage(v))
			gotErrs, gotErr := validate(open, json.RawMessage(v))
			require.Equal(t, wantErrs, gotErrs, "%q", v)
			require.Equal(t, wantErr, gotErr, "%q", v)
		}
	}
	for _, doc := range []string{`{"type":"object"}`, `false`, `{"not":{}}`} {
		s, err := rev.schema("closed:"+doc, func() (json.RawMessage, error) { return json.RawMessage(doc), nil })
		require.NoError(t, err)
		require.False(t, s.open, "%q does not accept every value", doc)
		errs, err := validate(s, json.RawMessage(`"x"`))
		require.NoError(t, err)
		require.NotEmpty(t, errs, "%q refuses a string", doc)
	}
}

// BenchmarkValidateEchoInput is one of an echo action's two schema checks
// (core.echo's contract is `{}` both ways) on the chain benchmark's value:
// open is validate's shortcut, library the schema library's full check
// (what every value took before).
func BenchmarkValidateEchoInput(b *testing.B) {
	rev := newRevision(revisionKey{"t", "c"}, &graph.Compiled{})
	s, err := rev.schema("in:core.echo@1", func() (json.RawMessage, error) { return json.RawMessage(`{}`), nil })
	if err != nil {
		b.Fatal(err)
	}
	value := json.RawMessage(`{"text":"hello from weftbench","n":42}`)
	for name, s := range map[string]*schema{"open": s, "library": {compiled: s.compiled}} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if errs, err := validate(s, value); err != nil || errs != nil {
					b.Fatal(errs, err)
				}
			}
		})
	}
}
