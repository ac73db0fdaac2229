package graph

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
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

// TestEveryFieldIsInTheChecksum sets each field of every type a Document is
// made of, one at a time, to a value that is not its zero value and
// requires the revision checksum to change. A field encoding/json does not
// write (unexported, `json:"-"`) fails here: the checksum is computed from
// what encoding/json writes, never from a list of fields.
func TestEveryFieldIsInTheChecksum(t *testing.T) {
	// Where a value of each type goes in a document.
	place := map[reflect.Type]func(v reflect.Value) Document{
		reflect.TypeFor[Document](): func(v reflect.Value) Document { return v.Interface().(Document) },
		reflect.TypeFor[Node](): func(v reflect.Value) Document {
			return Document{Nodes: []Node{v.Interface().(Node)}}
		},
		reflect.TypeFor[Edge](): func(v reflect.Value) Document {
			return Document{Edges: []Edge{v.Interface().(Edge)}}
		},
		reflect.TypeFor[Mapping](): func(v reflect.Value) Document {
			return Document{Nodes: []Node{{Mapping: map[string]Mapping{"m": v.Interface().(Mapping)}}}}
		},
		reflect.TypeFor[Retry](): func(v reflect.Value) Document {
			r := v.Interface().(Retry)
			return Document{Nodes: []Node{{Retry: &r}}}
		},
		reflect.TypeFor[AgentRef](): func(v reflect.Value) Document {
			a := v.Interface().(AgentRef)
			return Document{Nodes: []Node{{Agent: &a}}}
		},
		reflect.TypeFor[ActionRef](): func(v reflect.Value) Document {
			a := v.Interface().(ActionRef)
			return Document{Nodes: []Node{{Action: &a}}}
		},
		reflect.TypeFor[Toolset](): func(v reflect.Value) Document {
			return Document{Toolsets: map[string]Toolset{"t": v.Interface().(Toolset)}}
		},
	}
	// Every struct type a Document holds must be placed above.
	var reach func(typ reflect.Type)
	reach = func(typ reflect.Type) {
		switch typ.Kind() {
		case reflect.Pointer, reflect.Slice, reflect.Map:
			reach(typ.Elem())
		case reflect.Struct:
			_, ok := place[typ]
			require.True(t, ok, "%s is part of a Document: add it to this test", typ)
			for i := range typ.NumField() {
				reach(typ.Field(i).Type)
			}
		}
	}
	reach(reflect.TypeFor[Document]())

	sum := func(doc Document) string {
		s, err := checksum(&Compiled{Document: doc})
		require.NoError(t, err)
		return s
	}
	for typ, put := range place {
		zero := reflect.New(typ).Elem()
		want := sum(put(zero))
		for i := range typ.NumField() {
			f := typ.Field(i)
			v := reflect.New(typ).Elem()
			if !assert.True(t, v.Field(i).CanSet(), "%s.%s is unexported: encoding/json leaves it out of the checksum", typ.Name(), f.Name) {
				continue
			}
			v.Field(i).Set(nonZero(t, f.Type))
			assert.NotEqual(t, want, sum(put(v)), "setting %s.%s does not change the checksum: it is not part of it", typ.Name(), f.Name)
		}
	}
}

// nonZero returns a value of type t that is not its zero value and encodes
// to JSON.
func nonZero(t *testing.T, typ reflect.Type) reflect.Value {
	v := reflect.New(typ).Elem()
	switch {
	case typ == reflect.TypeFor[json.RawMessage]():
		v.SetBytes([]byte(`{"x":1}`))
	case typ.Kind() == reflect.String:
		v.SetString("x")
	case typ.Kind() == reflect.Int:
		v.SetInt(7)
	case typ.Kind() == reflect.Float64:
		v.SetFloat(1.5)
	case typ.Kind() == reflect.Bool:
		v.SetBool(true)
	case typ.Kind() == reflect.Pointer:
		v.Set(reflect.New(typ.Elem()))
		v.Elem().Set(nonZero(t, typ.Elem()))
	case typ.Kind() == reflect.Struct:
		for i := range typ.NumField() {
			if v.Field(i).CanSet() {
				v.Field(i).Set(nonZero(t, typ.Field(i).Type))
			}
		}
	case typ.Kind() == reflect.Slice:
		v.Set(reflect.Append(v, nonZero(t, typ.Elem())))
	case typ.Kind() == reflect.Map:
		v.Set(reflect.MakeMap(typ))
		v.SetMapIndex(reflect.ValueOf("k").Convert(typ.Key()), nonZero(t, typ.Elem()))
	default:
		t.Fatalf("no non-zero value for %s: extend nonZero", typ)
	}
	return v
}
