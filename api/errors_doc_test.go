package api

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/stretchr/testify/require"
)

// readmeCodeRow is a row of the README's "Error codes" table.
var readmeCodeRow = regexp.MustCompile("(?m)^\\| `([A-Z][A-Z0-9_]*)` \\| ([0-9]{3}) \\| (.+) \\|$")

// TestErrorCodesAreDocumented keeps the README's "Error codes" table, the
// status table (statusByCode), every code the failure package declares and
// the error schema of api/openapi.yaml in step: each code is in the README
// with the status it is answered with and a meaning, the README lists no
// code the API does not answer with, and the OpenAPI error code names each.
func TestErrorCodesAreDocumented(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	require.NoError(t, err)
	text := string(readme)
	start := strings.Index(text, "\n## Error codes\n")
	require.GreaterOrEqual(t, start, 0, "README.md has no \"## Error codes\" section")
	section := text[start+1:]
	if end := strings.Index(section, "\n## "); end >= 0 {
		section = section[:end]
	}
	documented := map[string]int{}
	for _, m := range readmeCodeRow.FindAllStringSubmatch(section, -1) {
		_, dup := documented[m[1]]
		require.False(t, dup, "README.md lists %s twice", m[1])
		documented[m[1]], _ = strconv.Atoi(m[2])
		require.NotEmpty(t, strings.TrimSpace(m[3]), "%s has no meaning in README.md", m[1])
	}

	for code, status := range statusByCode {
		got, ok := documented[code]
		require.True(t, ok, "%s (HTTP %d) is missing from README.md's Error codes table", code, status)
		require.Equal(t, status, got, "README.md gives %s the wrong status", code)
	}
	for code := range documented {
		_, ok := statusByCode[code]
		require.True(t, ok, "README.md lists %s, which api/errors.go does not answer with", code)
	}
	failureCodes := failurePackageCodes(t)
	require.NotEmpty(t, failureCodes)
	for _, code := range failureCodes {
		require.Contains(t, documented, code, "failure.%s is missing from README.md's Error codes table", code)
	}

	doc, err := openapi3.NewLoader().LoadFromFile("openapi.yaml")
	require.NoError(t, err)
	desc := strings.Join(strings.Fields(doc.Components.Schemas["Error"].Value.Properties["error"].Value.Properties["code"].Value.Description), " ")
	for code, status := range documented {
		require.Contains(t, desc, "`"+code+"` ("+strconv.Itoa(status)+")",
			"api/openapi.yaml's error code description does not name %s (%d)", code, status)
	}
}

// failurePackageCodes returns the values of the failure package's Code*
// constants, read from its source so a new one cannot be forgotten.
func failurePackageCodes(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "../failure/failure.go", nil, 0)
	require.NoError(t, err)
	var codes []string
	for _, decl := range f.Decls {
		gd, ok := decl.(*ast.GenDecl)
		if !ok || gd.Tok != token.CONST {
			continue
		}
		for _, spec := range gd.Specs {
			vs := spec.(*ast.ValueSpec)
			for i, name := range vs.Names {
				if !strings.HasPrefix(name.Name, "Code") || i >= len(vs.Values) {
					continue
				}
				lit, ok := vs.Values[i].(*ast.BasicLit)
				require.True(t, ok && lit.Kind == token.STRING, "failure.%s is not a string literal", name.Name)
				v, err := strconv.Unquote(lit.Value)
				require.NoError(t, err)
				codes = append(codes, v)
			}
		}
	}
	return codes
}
