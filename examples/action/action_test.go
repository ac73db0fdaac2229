package action_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/examples/action"
)

func TestExampleActions(t *testing.T) {
	dir := action.NewDirectory()
	dir.Add("acme", "ada@example.com", "vip")
	reg, err := action.Registry(catalog.BuiltinDeps{}, dir)
	require.NoError(t, err)
	lookup, ok := reg.Lookup("crm.contact.lookup", 1)
	require.True(t, ok, "lookup not registered")
	out, err := lookup.Handler(context.Background(), catalog.Call{TenantID: "acme", Input: json.RawMessage(`{"email":"Ada@example.com"}`)})
	require.NoError(t, err, "%s", out)
	require.Equal(t, `{"found":true,"name":"Ada@example.com","tags":["vip"]}`, string(out), "%s %v", out, err)
	// Another tenant's call never sees acme's contact.
	out, err = lookup.Handler(context.Background(), catalog.Call{TenantID: "globex", Input: json.RawMessage(`{"email":"ada@example.com"}`)})
	require.NoError(t, err, "%s", out)
	require.Equal(t, `{"found":false}`, string(out), "%s %v", out, err)
	tag, _ := reg.Lookup("crm.contact.tag", 1)
	call := catalog.Call{TenantID: "acme", IdempotencyKey: "run-1/tagger/1", Input: json.RawMessage(`{"email":"ada@example.com","tag":"renewal"}`)}
	for range 2 { // a retried attempt repeats the key
		_, err = tag.Handler(context.Background(), call)
		require.NoError(t, err)
	}
	tags, _ := dir.Tags("acme", "ada@example.com")
	require.Len(t, tags, 2, "tags %v: the repeated key tagged twice", tags)
}
