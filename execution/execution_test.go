package execution

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTerminal(t *testing.T) {
	for status, want := range map[string]bool{
		StatusQueued: false, StatusRunning: false, "": false,
		StatusSucceeded: true, StatusFailed: true, StatusCancelled: true,
	} {
		got := Terminal(status)
		assert.Equal(t, want, got, "Terminal(%q) = %v, want %v", status, got, want)
	}
}

// A live attempt's input leaves its zero VirtualNow out, and decodes the
// same as the form earlier releases wrote (rolling deploys: either
// release reads the other's inputs).
func TestNodeInputZeroTimesLeftOut(t *testing.T) {
	in := NodeInput{TenantID: "t", RunID: "r", Mode: ModeLive, NodeID: "a", Kind: "action", Attempt: 1,
		RunStartedAt: time.Date(2026, 12, 2, 8, 0, 0, 0, time.UTC)}
	raw, err := json.Marshal(in)
	require.NoError(t, err)
	assert.NotContains(t, string(raw), "virtualNow")
	assert.Contains(t, string(raw), `"runStartedAt":"2026-12-02T08:00:00Z"`)

	old := `{"tenantId":"t","runId":"r","workflowKey":"","checksum":"","mode":"live","nodeId":"a","kind":"action","attempt":1,` +
		`"inputs":null,"actor":{"kind":"","sub":""},"permissions":null,"runStartedAt":"2026-12-02T08:00:00Z","virtualNow":"0001-01-01T00:00:00Z"}`
	var fromOld, fromNew NodeInput
	require.NoError(t, json.Unmarshal([]byte(old), &fromOld))
	require.NoError(t, json.Unmarshal(raw, &fromNew))
	assert.Equal(t, in, fromOld)
	assert.Equal(t, in, fromNew)

	sim := in
	sim.Mode, sim.VirtualNow = ModeSimulation, time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	raw, err = json.Marshal(sim)
	require.NoError(t, err)
	assert.Contains(t, string(raw), `"virtualNow":"2026-01-01T00:00:00Z"`)
}
