package variables

import (
	"context"
	"errors"
	"testing"
)

func TestBuiltinRegistersEveryBuiltinKey(t *testing.T) {
	reg, err := Builtin(NoAgents{})
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, d := range reg.Definitions() {
		keys = append(keys, d.Key)
	}
	want := []string{KeyAgentName, KeyTenantName, KeyToday, KeyUserDisplayName, KeyUserEmail, KeyRunID, KeyWorkflowKey}
	if len(keys) != len(want) {
		t.Fatalf("keys = %v, want %d keys", keys, len(want))
	}
	for _, k := range want {
		if _, ok := reg.Lookup(k); !ok {
			t.Errorf("Builtin lacks %s", k)
		}
	}
	if _, err := Builtin(nil); err == nil {
		t.Fatal("Builtin(nil) succeeded")
	}
}

// NoAgents must refuse honestly: agent.name is RECORD_NOT_FOUND, never a
// made-up name, and everything else still resolves.
func TestBuiltinWithNoAgentsRefusesAgentName(t *testing.T) {
	reg, err := Builtin(NoAgents{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = reg.Resolve(context.Background(), "{{ agent.name }}", request())
	r := refusal(t, err, CodeRecordNotFound)
	if !errors.Is(err, ErrRecordNotFound) || len(r.Keys) != 1 || r.Keys[0] != KeyAgentName {
		t.Fatalf("refusal = %+v (cause %v)", r, errors.Unwrap(err))
	}
	out, err := reg.Resolve(context.Background(), "{{ context.tenantName }} / {{ run.id }}", request())
	if err != nil || out != "Acme / run-42" {
		t.Fatalf("Resolve = %q, %v", out, err)
	}
	if _, err := (NoAgents{}).AgentName(context.Background(), "tenant-a", "support-bot"); !errors.Is(err, ErrRecordNotFound) {
		t.Fatalf("NoAgents.AgentName err = %v", err)
	}
}
