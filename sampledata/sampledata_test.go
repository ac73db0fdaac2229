package sampledata_test

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/sampledata"
)

func TestGenerate(t *testing.T) {
	cases := []struct {
		name    string
		schemas []string
		want    string
	}{
		{"no schema", nil, `{}`},
		{"true", []string{`true`}, `{}`},
		{"empty", []string{`{}`}, `{}`},
		{"string", []string{`{"type":"string"}`}, `"sample"`},
		{"short string", []string{`{"type":"string","maxLength":3}`}, `"sam"`},
		{"long string", []string{`{"type":"string","minLength":8}`}, `"sampless"`},
		{"format", []string{`{"type":"string","format":"date-time"}`}, `"1970-01-01T00:00:00Z"`},
		{"enum", []string{`{"enum":["b","a"]}`}, `"b"`},
		{"const", []string{`{"const":{"k":1}}`}, `{"k":1}`},
		{"integer", []string{`{"type":"integer"}`}, `0`},
		{"integer min", []string{`{"type":"integer","minimum":3}`}, `3`},
		{"integer exclusive", []string{`{"type":"integer","exclusiveMinimum":3}`}, `4`},
		{"negative max", []string{`{"type":"number","maximum":-2.5}`}, `-2.5`},
		{"multipleOf", []string{`{"type":"integer","minimum":1,"multipleOf":5}`}, `5`},
		{"boolean", []string{`{"type":"boolean"}`}, `false`},
		{"null", []string{`{"type":"null"}`}, `null`},
		{"nullable string", []string{`{"type":["string","null"]}`}, `"sample"`},
		{"array", []string{`{"type":"array","items":{"type":"integer"},"minItems":2}`}, `[0,0]`},
		{"prefixItems", []string{`{"type":"array","prefixItems":[{"type":"string"},{"type":"boolean"}],"minItems":2}`}, `["sample",false]`},
		{"object", []string{`{"type":"object","required":["id","n"],"properties":{"id":{"type":"string"},"n":{"type":"integer","minimum":1},"opt":{"type":"string"}}}`}, `{"id":"sample","n":1}`},
		{"minProperties", []string{`{"type":"object","minProperties":1,"properties":{"b":{"type":"string"},"a":{"type":"boolean"}}}`}, `{"a":false}`},
		{"ref", []string{`{"$defs":{"item":{"type":"object","required":["id"],"properties":{"id":{"type":"string","enum":["x"]}}}},"$ref":"#/$defs/item"}`}, `{"id":"x"}`},
		{"allOf", []string{`{"allOf":[{"type":"object","required":["a"]},{"properties":{"a":{"type":"integer","minimum":2}}}]}`}, `{"a":2}`},
		{"anyOf", []string{`{"anyOf":[{"type":"string"},{"type":"integer"}]}`}, `"sample"`},
		{"two schemas", []string{`{"type":"object","required":["noteId"],"properties":{"noteId":{"type":"string"}}}`, `{"type":"object","required":["id"],"properties":{"id":{"type":"string","minLength":1}}}`}, `{"id":"sample","noteId":"sample"}`},
		{"sleep contract", []string{string(catalog.SleepV1.OutputSchema)}, `{"sleptMs":0}`},
		{"notes contract", []string{string(catalog.NotesWriteV1.OutputSchema)}, `{"noteId":"sample"}`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			raws := make([]json.RawMessage, len(c.schemas))
			for i, s := range c.schemas {
				raws[i] = json.RawMessage(s)
			}
			got, err := sampledata.Generate(raws...)
			require.NoError(t, err)
			require.JSONEq(t, c.want, string(got))
			// Deterministic: the same bytes every time.
			for range 5 {
				again, err := sampledata.Generate(raws...)
				require.NoError(t, err)
				require.Equal(t, string(got), string(again))
			}
		})
	}
}

func TestGenerateRefusesWhatItCannotSatisfy(t *testing.T) {
	for name, schema := range map[string]string{
		"false":           `false`,
		"pattern":         `{"type":"string","pattern":"^[0-9]{4}$"}`,
		"empty range":     `{"type":"integer","minimum":5,"maximum":2}`,
		"no common type":  `{"allOf":[{"type":"string"},{"type":"integer"}]}`,
		"external ref":    `{"$ref":"https://example.com/s.json"}`,
		"required cycle":  `{"$defs":{"n":{"type":"object","required":["next"],"properties":{"next":{"$ref":"#/$defs/n"}}}},"$ref":"#/$defs/n"}`,
		"not json schema": `{"type":`,
	} {
		t.Run(name, func(t *testing.T) {
			_, err := sampledata.Generate(json.RawMessage(schema))
			require.Error(t, err)
			require.True(t, errors.Is(err, sampledata.ErrNoDefault), "%v", err)
		})
	}
}
