package graph

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestGeneratedChecksumsArePinned pins the checksums of generated graphs
// (the benchmark's 200-node graph, and fuzz-style documents with raw
// schemas and literals, toolsets, agents, retries and mappings) as computed
// before the canonical form was reimplemented; see pin_test.go.
func TestGeneratedChecksumsArePinned(t *testing.T) {
	c, issues := Compile(genGraph(66, 3), testCatalog())
	require.Empty(t, issues)
	require.Equal(t, "5a320ee0738e56ac688010b0b551bfed2a21b16b04f5c5835d1102bd59954f81", c.Checksum, "genGraph(66, 3)")

	// The checksums of every seed that compiles, folded into one digest.
	var all strings.Builder
	compiled := 0
	for seed := range 300 {
		data := make([]byte, 64)
		for i := range data {
			data[i] = byte(seed*31 + i*i*7 + seed*i)
		}
		if c, issues := Compile(docFromBytes(data), testCatalog()); len(issues) == 0 {
			fmt.Fprintf(&all, "%d:%s\n", seed, c.Checksum)
			compiled++
		}
	}
	require.Equal(t, "56 d3fe847e4d08e2fa241824e055a4d4e04ab02c7a38e1f5d5312396261ac1b9cb", fmt.Sprintf("%d %s", compiled, SHA256Hex([]byte(all.String()))))
}
