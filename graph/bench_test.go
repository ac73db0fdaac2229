package graph

import (
	"encoding/json"
	"testing"
)

// benchCompile decodes nothing: it measures Validate + Compile of a graph.
func benchCompile(b *testing.B, doc *Document) {
	cat := testCatalog()
	if c, issues := Compile(doc, cat); len(issues) > 0 || c == nil {
		b.Fatalf("graph does not compile: %v", issues)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, issues := Compile(doc, cat); len(issues) > 0 {
			b.Fatal(issues)
		}
	}
}

// BenchmarkValidateCompile200 is the limit-sized graph: 200 nodes, 400 edges.
func BenchmarkValidateCompile200(b *testing.B) { benchCompile(b, genGraph(66, 3)) }

// BenchmarkValidateCompile20 is the baseline: the same shape at 20 nodes.
func BenchmarkValidateCompile20(b *testing.B) { benchCompile(b, genGraph(6, 0)) }

// BenchmarkDecode200 is the second baseline: strict decoding of the same
// 200-node document, which every API call pays before validating.
func BenchmarkDecode200(b *testing.B) {
	data, err := json.Marshal(genGraph(66, 3))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCheckGate is the cost of type-checking one cel/v1 expression,
// the largest single part of validation (once per distinct expression).
func BenchmarkCheckGate(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, err := checkGate("input != null && 12 >= 0"); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkCanonical200 is the RFC 8785 encoding of the 200-node document,
// the checksum's share of Compile.
func BenchmarkCanonical200(b *testing.B) {
	doc := genGraph(66, 3)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonical(doc); err != nil {
			b.Fatal(err)
		}
	}
}
