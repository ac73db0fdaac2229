package graph

import (
	"encoding/json"
	"testing"
)

// benchCompile decodes nothing: it measures Validate + Compile of a graph
// with the package-level Compile, which builds a fresh, uncached cel/v1
// environment per call.
func benchCompile(b *testing.B, doc *Document) {
	cat := testCatalog()
	if c, issues := Compile(doc, cat); len(issues) > 0 || c == nil {
		b.Fatalf("graph does not compile: %v", issues)
	}
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if _, issues := Compile(doc, cat); len(issues) > 0 {
			b.Fatal(issues)
		}
	}
	cpu.report(b)
}

// BenchmarkValidateCompile200 is the limit-sized graph: 200 nodes, 400 edges.
func BenchmarkValidateCompile200(b *testing.B) { benchCompile(b, genGraph(66, 3)) }

// BenchmarkValidateCompile200Cold is what publishing a graph whose gate
// expressions and schemas the process has never seen costs: a new Compiler
// (its environment built and its caches empty) per compilation.
func BenchmarkValidateCompile200Cold(b *testing.B) {
	doc, cat := genGraph(66, 3), testCatalog()
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		opts := Options{Compiler: NewCompiler(CompilerConfig{})}
		if _, issues := CompileWith(doc, cat, opts); len(issues) > 0 {
			b.Fatal(issues)
		}
	}
	cpu.report(b)
}

// BenchmarkValidateCompile200ColdParallel is many cold publishes at once
// (GOMAXPROCS goroutines, a new Compiler each): the throughput an API busy
// with publishes gets, where checking one graph's gates on a second core
// can only cost, never gain.
func BenchmarkValidateCompile200ColdParallel(b *testing.B) {
	doc, cat := genGraph(66, 3), testCatalog()
	b.ReportAllocs()
	cpu := startCPU()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			opts := Options{Compiler: NewCompiler(CompilerConfig{})}
			if _, issues := CompileWith(doc, cat, opts); len(issues) > 0 {
				b.Error(issues)
				return
			}
		}
	})
	cpu.report(b)
}

// BenchmarkValidateCompile200Warm is re-validating content a long-lived
// Compiler has seen (a saved draft, a dry-run before publishing): every
// gate expression and schema is answered from its cache; everything else is
// done again.
func BenchmarkValidateCompile200Warm(b *testing.B) {
	doc, cat := genGraph(66, 3), testCatalog()
	opts := Options{Compiler: NewCompiler(CompilerConfig{})}
	if _, issues := CompileWith(doc, cat, opts); len(issues) > 0 {
		b.Fatal(issues)
	}
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if _, issues := CompileWith(doc, cat, opts); len(issues) > 0 {
			b.Fatal(issues)
		}
	}
	cpu.report(b)
}

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
	cpu := startCPU()
	for b.Loop() {
		if _, err := Decode(data); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// BenchmarkUnmarshal200 is the plain-library baseline: json.Unmarshal of the
// same document into a Document, with none of Decode's strictness.
func BenchmarkUnmarshal200(b *testing.B) {
	data, err := json.Marshal(genGraph(66, 3))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		var doc Document
		if err := json.Unmarshal(data, &doc); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// BenchmarkCheckGate is the cost of type-checking one cel/v1 expression,
// the largest single part of validation (once per distinct expression).
func BenchmarkCheckGate(b *testing.B) {
	c := NewCompiler(CompilerConfig{})
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if _, err := c.checkGate("input != null && 12 >= 0"); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}

// BenchmarkCanonical200 is the RFC 8785 encoding of the 200-node document,
// the checksum's share of Compile.
func BenchmarkCanonical200(b *testing.B) {
	doc := genGraph(66, 3)
	b.ReportAllocs()
	cpu := startCPU()
	for b.Loop() {
		if _, err := Canonical(doc); err != nil {
			b.Fatal(err)
		}
	}
	cpu.report(b)
}
