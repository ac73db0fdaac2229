package graph

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

var decodeCodes = []string{CodeInvalidJSON, CodeInvalidDocument, CodeDocumentTooLarge}

// FuzzDecode feeds arbitrary bytes, and a generated document damaged at a
// few places the same bytes choose (near-valid input), through Decode and,
// when they decode, through Validate, DryRun, Compile and Plan: nothing may
// panic, errors are coded, and a compiled document re-decodes to the same
// checksum, also with its nodes, edges and members in another order.
func FuzzDecode(f *testing.F) {
	f.Add(exampleJSON(f))
	f.Add([]byte(cycleJSON))
	f.Add([]byte(`{"schemaVersion":1,"nodes":[{"id":"x","kind":"loop"}],"edges":[{"from":"x","to":"y"}]}`))
	f.Add([]byte(`{"schemaVersion":1,"nodes":[{"id":"in","kind":"input","outputs":{"out":"any"}},{"id":"in","kind":"output","inputs":{"in":"any"}}],"edges":[{"from":"in.out","to":"in.in"}]}`))
	f.Add([]byte(`{"schemaVersion":1,"schemas":{"A":{"type":"nope"}},"toolsets":{"t":{"tools":["core.echo@1"],"skill":""}},"tools":"u"}`))
	f.Add([]byte(`{"schemaVersion":1,"schemaVersion":1}`))
	f.Add([]byte(`[1,2`))
	f.Add([]byte(`{"schemaVersion":1,"nodes":[{"id":"a","kind":"action","schema":null,"mapping":{"x":{"literal":{"b":[1e308,-0,"\ud83d\ude00"],"a":null},"bindings":{}}},"retry":{"backoff":1.5e0,"maxAttempts":-0}}],"edges":[],"tools":"\u0069"}`))
	f.Add([]byte(` {"schemaVersion" : 1 , "schemas":{"A":{"a":{"a":1},"b":{"a":2}}}, "toolsets":{"t":{"tools":[],"skill":"s"}}} `))
	f.Add([]byte(`{"schemaVersion":1,"nodes":[{"i\u0064":"x","kind":"input","inputs":{"a":"b","a":"c"}}]}`))
	f.Add([]byte(`{"schemaVersion":1,"schemas":{"A":[1.0e999]}}`))
	cat := testCatalog()
	// One small Compiler for the whole run, so cached answers (and
	// evictions) are exercised against fresh ones.
	compiler := NewCompiler(CompilerConfig{CacheEntries: 64})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, text := range [][]byte{data, mutatedDocumentJSON(data)} {
			doc, err := Decode(text)
			if err != nil {
				var de *DecodeError
				require.ErrorAs(t, err, &de, "uncoded decode error %v", err)
				require.True(t, slices.Contains(decodeCodes, de.Code), "uncoded decode error %v", err)
				_, err = ParsePointer(de.Path)
				require.NoError(t, err, "decode error path %q is not a JSON pointer", de.Path)
				continue
			}
			checkValidateProperties(t, doc, cat, compiler, fuzzRand(text))
		}
	})
}

// FuzzValidate builds documents directly from the fuzzer's bytes (so they
// need not survive Decode) from a small vocabulary of ids, kinds, ports,
// schemas, expressions and pointers that collide often.
func FuzzValidate(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x04\x00\x01\x02\x03\x00\x00\x01\x01\x02\x02\x03\x03"))
	f.Add([]byte("graph with gates, merges and actions: 0123456789abcdefghijklmnop"))
	f.Add([]byte{8, 0, 3, 3, 5, 6, 7, 1, 1, 0, 2, 9, 9, 4, 4, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12})
	cat := testCatalog()
	compiler := NewCompiler(CompilerConfig{CacheEntries: 64})
	f.Fuzz(func(t *testing.T, data []byte) {
		doc := docFromBytes(data)
		checkValidateProperties(t, doc, cat, compiler, fuzzRand(data))
	})
}

func checkValidateProperties(t *testing.T, doc *Document, cat Catalog, compiler *Compiler, rng *rand.Rand) {
	t.Helper()
	issues := Validate(doc, cat)
	cached := ValidateWith(doc, cat, Options{Compiler: compiler})
	require.Equal(t, issues, cached, "a Compiler changed the issues")
	for _, is := range issues {
		require.NotEmpty(t, is.Code, "incomplete issue %+v", is)
		require.NotEmpty(t, is.Message, "incomplete issue %+v", is)
		_, err := ParsePointer(is.Path)
		require.NoError(t, err, "issue path %q is not a JSON pointer", is.Path)
	}
	res := DryRun(doc, cat)
	require.Equal(t, len(issues) == 0, res.Valid, "dry-run valid=%v with %d issues", res.Valid, len(issues))
	c, compileIssues := Compile(doc, cat)
	require.Len(t, compileIssues, len(issues), "Compile found %d issues, Validate %d", len(compileIssues), len(issues))
	if c == nil {
		return
	}
	require.Equal(t, c.Checksum, res.Checksum, "dry-run and compile disagree")
	require.True(t, slices.Equal(res.Order, c.Order), "dry-run and compile disagree")
	require.NoError(t, c.VerifyChecksum())
	p := c.Plan()
	require.Len(t, p.Nodes, len(doc.Nodes), "plan has %d nodes for %d", len(p.Nodes), len(doc.Nodes))
	raw, err := json.Marshal(c.Document)
	require.NoError(t, err)
	again, err := Decode(raw)
	require.NoError(t, err, "compiled document does not decode: %v\n%s", err, raw)
	c2, issues2 := Compile(again, cat)
	require.Empty(t, issues2, "re-decoded document compiles differently: %v", issues2)
	require.Equal(t, c.Checksum, c2.Checksum, "re-decoded document compiles differently: %v", issues2)
	// The checksum depends on content only (SPEC §3): the same document
	// with its nodes, edges and object members in another order, and
	// other whitespace, has the same checksum.
	shuffled := *doc
	shuffled.Nodes, shuffled.Edges = slices.Clone(doc.Nodes), slices.Clone(doc.Edges)
	rng.Shuffle(len(shuffled.Nodes), func(i, j int) { shuffled.Nodes[i], shuffled.Nodes[j] = shuffled.Nodes[j], shuffled.Nodes[i] })
	rng.Shuffle(len(shuffled.Edges), func(i, j int) { shuffled.Edges[i], shuffled.Edges[j] = shuffled.Edges[j], shuffled.Edges[i] })
	raw, err = json.Marshal(shuffled)
	require.NoError(t, err)
	generic, err := DecodeValue(raw)
	require.NoError(t, err)
	var text bytes.Buffer
	writeShuffled(&text, rng, generic)
	reordered, err := Decode(text.Bytes())
	require.NoError(t, err, "reordered document does not decode: %v\n%s", err, text.Bytes())
	c3, issues3 := Compile(reordered, cat)
	require.Empty(t, issues3, "reordered document compiles to %v, %v; want checksum %s\n%s", c3, issues3, c.Checksum, text.Bytes())
	require.Equal(t, c.Checksum, c3.Checksum, "reordered document compiles to %v, %v; want checksum %s\n%s", c3, issues3, c.Checksum, text.Bytes())
}

// byteReader hands out fuzz bytes; past the end it yields zeros.
type byteReader struct {
	data []byte
	pos  int
}

func (r *byteReader) next() int {
	if r.pos >= len(r.data) {
		return 0
	}
	b := r.data[r.pos]
	r.pos++
	return int(b)
}

func pick[T any](r *byteReader, from []T) T { return from[r.next()%len(from)] }

// docFromBytes builds a document from fuzz bytes: either a valid chain with
// a few mutations (so Compile and its properties get exercised) or a soup of
// colliding parts (so every issue path gets exercised).
func docFromBytes(data []byte) *Document {
	r := &byteReader{data: data}
	if r.next()%2 == 0 {
		return mutatedChain(r)
	}
	return soup(r)
}

func mutatedChain(r *byteReader) *Document {
	doc := &Document{SchemaVersion: 1, Schemas: map[string]json.RawMessage{"Item": json.RawMessage(`{"type":"object"}`)},
		Nodes: []Node{{ID: "in", Kind: KindInput, Outputs: map[string]string{"out": "any"}}}}
	sources := []string{"in.out"}
	connect := func(n *Node, port string) {
		n.Inputs[port] = "any"
		doc.Edges = append(doc.Edges, Edge{From: pick(r, sources), To: n.ID + "." + port})
	}
	steps := 1 + r.next()%12
	for i := range steps {
		n := Node{ID: fmt.Sprintf("n%d", i), Inputs: map[string]string{}}
		switch r.next() % 6 {
		case 0:
			n.Kind, n.Language, n.Expression = KindGate, LanguageCELv1, pick(r, []string{"true", "input != null", "has(input.id)"})
			n.Outputs = map[string]string{"pass": "any", "fail": "any"}
			connect(&n, "in")
		case 1:
			n.Kind, n.Schema = KindValidator, json.RawMessage(`{"type":"array"}`)
			n.Outputs = map[string]string{"pass": "any", "fail": "any"}
			if r.next()%2 == 0 {
				n.Schema, n.Outputs["pass"] = json.RawMessage(`"Item"`), "Item"
			}
			connect(&n, "in")
		case 2:
			n.Kind, n.Action = KindAction, pick(r, []*ActionRef{{"core.echo", 1}, {"workspace.notes.write", 1}, {"core.sleep", 1}})
			n.Outputs = map[string]string{"out": "any"}
			connect(&n, "in")
			if r.next()%2 == 0 {
				connect(&n, "extra")
				p := "/extra/x"
				n.Mapping = map[string]Mapping{"a": {Pointer: &p}, "b": {Literal: json.RawMessage(`[1.0,{"z":null}]`)}}
			}
			if r.next()%2 == 0 {
				n.Retry, n.TimeoutMs = &Retry{MaxAttempts: 1 + r.next()%10, Backoff: 1.5}, 250+r.next()*100
			}
		case 3:
			n.Kind, n.Outputs = KindMerge, map[string]string{"out": "any"}
			for k := range 1 + r.next()%3 {
				connect(&n, fmt.Sprintf("p%d", k))
			}
		case 4, 5:
			n.Kind, n.Agent, n.Tools = KindAgent, &AgentRef{Key: "triage", Revision: 2}, pick(r, []string{"", "ops"})
			n.Outputs = map[string]string{"out": "any"}
			if r.next()%2 == 0 {
				n.Kind, n.Outputs = KindAgentDecision, map[string]string{"pass": "any", "fail": "any"}
			}
			connect(&n, "in")
		}
		doc.Nodes = append(doc.Nodes, n)
		for _, p := range slices.Sorted(maps.Keys(n.Outputs)) {
			sources = append(sources, n.ID+"."+p)
		}
	}
	out := Node{ID: "out", Kind: KindOutput, Inputs: map[string]string{}}
	connect(&out, "in")
	doc.Nodes = append(doc.Nodes, out)
	doc.Toolsets = map[string]Toolset{"ops": {Tools: []string{"core.echo@1"}, Skill: "Be brief."}}

	for range r.next() % 3 {
		e := len(doc.Edges)
		n := &doc.Nodes[r.next()%len(doc.Nodes)]
		switch r.next() % 8 {
		case 0:
			i := r.next() % e
			doc.Edges = slices.Delete(doc.Edges, i, i+1)
		case 1:
			doc.Edges = append(doc.Edges, doc.Edges[r.next()%e])
		case 2:
			doc.Edges[r.next()%e].To = pick(r, doc.Edges).To
		case 3:
			doc.Edges = append(doc.Edges, Edge{From: pick(r, sources), To: "n0.in"})
		case 4:
			n.ID = pick(r, []string{"in", "n0", "Bad", "out"})
		case 5:
			n.Kind = pick(r, []Kind{KindGate, KindMerge, KindOutput, "loop"})
		case 6:
			n.Retry = &Retry{MaxAttempts: 11}
		case 7:
			doc.Edges[r.next()%e].From = "out.in"
		}
	}
	return doc
}

func soup(r *byteReader) *Document {
	ids := []string{"in", "a", "b", "c", "out", "g", "Bad", "m", "in"}
	kinds := []Kind{KindInput, KindGate, KindAction, KindMerge, KindOutput, KindValidator, KindAgent, KindAgentDecision, "loop"}
	ports := []string{"in", "out", "pass", "fail", "x", "y", "a.b"}
	schemas := []string{"any", "any", "Item", "Nope"}
	exprs := []string{"true", "input.id != ''", "input.", "'s'", "input.all(x, x > 0)", "", string(r.data)}
	pointers := []string{"/in", "/x", "in", "/in/~2", "/y/a~1b", ""}
	actions := []ActionRef{{"core.echo", 1}, {"core.http.fetch", 1}, {"workspace.notes.write", 1}, {"core.echo", 2}, {"", 0}}
	doc := &Document{SchemaVersion: 1, Schemas: map[string]json.RawMessage{"Item": json.RawMessage(`{"type":"object"}`)}}
	if r.next()%5 == 0 {
		doc.Schemas["Broken"] = json.RawMessage(`{"type":1}`)
	}
	nodes := r.next() % 10
	for range nodes {
		n := Node{ID: pick(r, ids), Kind: pick(r, kinds)}
		if k := r.next() % 3; k > 0 {
			n.Inputs = map[string]string{}
			for range k {
				n.Inputs[pick(r, ports)] = pick(r, schemas)
			}
		}
		if k := r.next() % 3; k > 0 {
			n.Outputs = map[string]string{}
			for range k {
				n.Outputs[pick(r, ports)] = pick(r, schemas)
			}
		}
		switch n.Kind {
		case KindGate:
			n.Language = pick(r, []string{LanguageCELv1, LanguageCELv1, "js"})
			n.Expression = pick(r, exprs)
		case KindValidator:
			n.Schema = pick(r, []json.RawMessage{json.RawMessage(`"Item"`), json.RawMessage(`{"type":"string"}`), json.RawMessage(`"Nope"`), json.RawMessage(`[]`), nil})
		case KindAction:
			a := pick(r, actions)
			n.Action = &a
		case KindAgent, KindAgentDecision:
			n.Agent = pick(r, []*AgentRef{{Key: "triage", Revision: 2}, {Key: "old", Revision: 1}, nil})
			n.Tools = pick(r, []string{"", "ops", "none"})
		}
		if r.next()%3 == 0 {
			n.Mapping = map[string]Mapping{}
			for k := range r.next() % 3 {
				p := pick(r, pointers)
				tmpl := "{{ v }}"
				n.Mapping[fmt.Sprint("f", k)] = pick(r, []Mapping{{Pointer: &p}, {Literal: json.RawMessage(`{"a":1}`)}, {Template: &tmpl, Bindings: map[string]string{"v": p}}, {}})
			}
		}
		if r.next()%4 == 0 {
			n.Retry = &Retry{MaxAttempts: r.next() % 13, InitialIntervalMs: r.next() * 100, Backoff: float64(r.next()%5) / 2}
			n.TimeoutMs = r.next() * 1000
		}
		doc.Nodes = append(doc.Nodes, n)
	}
	edges := r.next() % 16
	for range edges {
		doc.Edges = append(doc.Edges, Edge{
			From: pick(r, ids) + "." + pick(r, ports),
			To:   pick(r, ids) + pick(r, []string{".", ".", ""}) + pick(r, ports),
		})
	}
	if r.next()%4 == 0 {
		doc.Toolsets = map[string]Toolset{"ops": {Tools: []string{pick(r, []string{"core.echo@1", "core.http.fetch@1", "x"})}, Skill: strings.Repeat("s", r.next()%2)}}
		doc.Tools = pick(r, []string{"", "ops", "nope"})
	}
	return doc
}
