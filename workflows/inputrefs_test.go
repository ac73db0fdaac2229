package workflows

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/weftworks/weft/execution"
)

// wideDesc: eight actions feed an action with eight input ports and,
// withMerge, a merge of the same eight, whose results are merged and
// returned.
func wideDesc(withMerge bool) string {
	var b strings.Builder
	b.WriteString("in input\n")
	var ports []string
	for k := range 8 {
		fmt.Fprintf(&b, "a%d action in=in.out\n", k)
		ports = append(ports, fmt.Sprintf("p%d=a%d.out", k, k))
	}
	if !withMerge {
		fmt.Fprintf(&b, "pack action %s\nout output in=pack.out\n", strings.Join(ports, " "))
		return b.String()
	}
	fmt.Fprintf(&b, "m merge %s\n", strings.Join(ports, " "))
	fmt.Fprintf(&b, "pack action %s\n", strings.Join(ports, " "))
	b.WriteString("fin merge x=m.out y=pack.out\nout output in=fin.out\n")
	return b.String()
}

// wideSteps makes each a<k> return a distinct JSON string of size bytes.
func wideSteps(size int) map[string][]step {
	steps := map[string][]step{}
	for k := range 8 {
		steps[fmt.Sprintf("a%d", k)] = []step{{value: `"` + strings.Repeat(string(rune('a'+k)), size-2) + `"`}}
	}
	return steps
}

// inlineBytes is what an attempt's inputs carry inline, and how many refs.
func inlineBytes(in execution.NodeInput) (inline, refs int) {
	for _, v := range in.Inputs {
		inline += len(v.Inline)
		if v.Ref != nil {
			refs++
		}
	}
	return inline, refs
}

// checkWideInputs asserts what the interpreter passed pack: at most the
// budget inline, the rest claim-checked in one StoreValues call under the
// producing nodes, largest first.
func checkWideInputs(t *testing.T, f *fakes, size int) {
	t.Helper()
	packs := f.nodeInputs("pack")
	require.Len(t, packs, 1)
	inline, refs := inlineBytes(packs[0])
	require.LessOrEqual(t, inline, nodeInputInlineBudget)
	require.Equal(t, 8, inline/size+refs, "every port has its value, inline or by reference")
	stored := f.storedValues()
	require.Len(t, stored, 1, "one claim-check for the attempt")
	require.Len(t, stored[0].Values, refs)
	for k, v := range stored[0].Values {
		require.Equal(t, fmt.Sprintf("a%d", k), v.NodeID, "equal sizes go in compiled order")
		require.Equal(t, "out", v.Port)
		require.Len(t, v.Value, size)
		ref := packs[0].Inputs[fmt.Sprintf("p%d", k)].Ref
		require.NotNil(t, ref)
		require.Equal(t, v.NodeID, ref.NodeID)
	}
}

func TestWideNodeInputsAreClaimChecked(t *testing.T) {
	const size = 20 << 10
	w := newWF(t, wideDesc(true), wideSteps(size))
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	checkLog(t, w.f, "run-1", 1, execution.StatusSucceeded)
	checkWideInputs(t, w.f, size)
	// The merge ran (as a local activity) before pack, on the values
	// inline; the references then resolve the ports for later consumers.
	ms := w.f.nodeInputs("m")
	require.Len(t, ms, 1)
	inline, refs := inlineBytes(ms[0])
	require.Equal(t, 8*size, inline)
	require.Zero(t, refs)
	fin := w.f.nodeInputs("fin")
	require.Len(t, fin, 1)
}

func TestSmallNodeInputsStayInline(t *testing.T) {
	const size = 4 << 10 // 8 x 4 KiB = the budget exactly
	w := newWF(t, wideDesc(true), wideSteps(size))
	require.NoError(t, w.run(testParams(execution.ModeLive)))
	inline, refs := inlineBytes(w.f.nodeInputs("pack")[0])
	require.Equal(t, 8*size, inline)
	require.Zero(t, refs)
	require.Empty(t, w.f.storedValues())
}
