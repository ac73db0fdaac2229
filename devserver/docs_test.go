package devserver_test

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/devserver"
	"github.com/weftworks/weft/execution"
	"github.com/weftworks/weft/internal/testinfra"
)

// TestREADMEDocumentsSettings keeps the README's settings honest: every
// environment variable config.FromEnv reads, every dev-server tuning value
// and every search attribute is named there.
func TestREADMEDocumentsSettings(t *testing.T) {
	root := testinfra.RepoRoot()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	require.NoError(t, err)
	src, err := os.ReadFile(filepath.Join(root, "config", "config.go"))
	require.NoError(t, err)
	vars := regexp.MustCompile(`get\("([A-Z][A-Z0-9_]+)"|(?:intEnv|durationEnv)\(get, "([A-Z][A-Z0-9_]+)"`).FindAllStringSubmatch(string(src), -1)
	require.GreaterOrEqual(t, len(vars), 10, "found only %d variables in config.go; has its shape changed?", len(vars))
	for _, m := range vars {
		name := m[1] + m[2]
		assert.Contains(t, string(readme), "`"+name+"`", "README does not document %s", name)
	}
	for _, s := range devserver.SQLitePragmas {
		assert.Contains(t, string(readme), "--sqlite-pragma "+s.Key+"="+s.Value, "README does not document the dev server pragma %s=%s", s.Key, s.Value)
	}
	for _, s := range devserver.DynamicConfig {
		assert.Contains(t, string(readme), s.Key+"="+s.Value, "README does not document the dev server setting %s=%s", s.Key, s.Value)
	}
	for _, a := range execution.SearchAttributeTypes {
		assert.Contains(t, string(readme), a.Name+"="+a.Type, "README does not document the search attribute %s=%s", a.Name, a.Type)
	}
}
