package variables

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestBuiltinRegistersEveryBuiltinKey(t *testing.T) {
	reg, err := Builtin(NoAgents{})
	require.NoError(t, err)
	var keys []string
	for _, d := range reg.Definitions() {
		keys = append(keys, d.Key)
	}
	want := []string{KeyAgentName, KeyTenantName, KeyToday, KeyUserDisplayName, KeyUserEmail, KeyRunID, KeyWorkflowKey}
	require.Len(t, keys, len(want), "keys = %v, want %d keys", keys, len(want))
	for _, k := range want {
		_, ok := reg.Lookup(k)
		assert.True(t, ok, "Builtin lacks %s", k)
	}
	_, err = Builtin(nil)
	require.Error(t, err, "Builtin(nil) succeeded")
}

// NoAgents must refuse honestly: agent.name is RECORD_NOT_FOUND, never a
// made-up name, and everything else still resolves.
func TestBuiltinWithNoAgentsRefusesAgentName(t *testing.T) {
	reg, err := Builtin(NoAgents{})
	require.NoError(t, err)
	_, err = reg.Resolve(context.Background(), "{{ agent.name }}", request())
	r := refusal(t, err, CodeRecordNotFound)
	require.ErrorIs(t, err, ErrRecordNotFound, "refusal = %+v (cause %v)", r, errors.Unwrap(err))
	require.Len(t, r.Keys, 1, "refusal = %+v (cause %v)", r, errors.Unwrap(err))
	require.Equal(t, KeyAgentName, r.Keys[0], "refusal = %+v (cause %v)", r, errors.Unwrap(err))
	out, err := reg.Resolve(context.Background(), "{{ context.tenantName }} / {{ run.id }}", request())
	require.NoError(t, err, "Resolve = %q,", out)
	require.Equal(t, "Acme / run-42", out, "Resolve = %q, %v", out, err)
	_, err = (NoAgents{}).AgentName(context.Background(), "tenant-a", "support-bot")
	require.ErrorIs(t, err, ErrRecordNotFound, "NoAgents.AgentName err = %v", err)
}
