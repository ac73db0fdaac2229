package action_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/weftworks/weft/catalog"
	"github.com/weftworks/weft/examples/action"
)

func TestExampleActions(t *testing.T) {
	dir := action.NewDirectory()
	dir.Add("acme", "ada@example.com", "vip")
	reg, err := action.Registry(catalog.BuiltinDeps{}, dir)
	if err != nil {
		t.Fatal(err)
	}
	lookup, ok := reg.Lookup("crm.contact.lookup", 1)
	if !ok {
		t.Fatal("lookup not registered")
	}
	out, err := lookup.Handler(context.Background(), catalog.Call{TenantID: "acme", Input: json.RawMessage(`{"email":"Ada@example.com"}`)})
	if err != nil || string(out) != `{"found":true,"name":"Ada@example.com","tags":["vip"]}` {
		t.Fatalf("%s %v", out, err)
	}
	// Another tenant's call never sees acme's contact.
	out, err = lookup.Handler(context.Background(), catalog.Call{TenantID: "globex", Input: json.RawMessage(`{"email":"ada@example.com"}`)})
	if err != nil || string(out) != `{"found":false}` {
		t.Fatalf("%s %v", out, err)
	}
	tag, _ := reg.Lookup("crm.contact.tag", 1)
	call := catalog.Call{TenantID: "acme", IdempotencyKey: "run-1/tagger/1", Input: json.RawMessage(`{"email":"ada@example.com","tag":"renewal"}`)}
	for range 2 { // a retried attempt repeats the key
		if _, err := tag.Handler(context.Background(), call); err != nil {
			t.Fatal(err)
		}
	}
	if tags, _ := dir.Tags("acme", "ada@example.com"); len(tags) != 2 {
		t.Fatalf("tags %v: the repeated key tagged twice", tags)
	}
}
