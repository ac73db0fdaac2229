package main

import (
	"math"
	"strings"
	"testing"
)

func TestMedianIntervalOrderStatistics(t *testing.T) {
	// For 15 values the interval is x(4)..x(12) (coverage 96.5%; x(5)..x(11)
	// would cover only 88.2%), whatever order they come in.
	v := []float64{15, 3, 9, 1, 12, 7, 14, 5, 2, 11, 8, 4, 13, 6, 10}
	lo, hi, ok := medianInterval(v)
	if !ok || lo != 4 || hi != 12 {
		t.Fatalf("medianInterval(1..15) = %v, %v, %v; want 4, 12, true", lo, hi, ok)
	}
	if got := binomialCoverage(15, 4); math.Abs(got-(1-2*576.0/32768)) > 1e-12 {
		t.Fatalf("binomialCoverage(15, 4) = %v", got)
	}
	// Five values: even min..max covers 1 − 2/32 = 93.75%.
	if _, _, ok := medianInterval([]float64{1, 2, 3, 4, 5}); ok {
		t.Fatal("five values gave an interval")
	}
	// Six: min..max covers 96.9%.
	if lo, hi, ok := medianInterval([]float64{6, 1, 5, 2, 4, 3}); !ok || lo != 1 || hi != 6 {
		t.Fatalf("six values: %v, %v, %v", lo, hi, ok)
	}
	// The input is left as it was.
	if v[0] != 15 || v[14] != 10 {
		t.Fatal("medianInterval sorted its input in place")
	}
}

func TestDescribeIntervalAgainstTarget(t *testing.T) {
	low := []float64{1.01, 1.02, 1.03, 1.04, 1.05, 1.06, 1.07, 1.08}
	spans := []float64{1.00, 1.04, 1.06, 1.08, 1.12, 1.14, 1.16, 1.20}
	high := []float64{1.11, 1.12, 1.13, 1.14, 1.15, 1.16, 1.17, 1.18}
	for _, c := range []struct {
		rs    []float64
		below bool
		want  string
	}{
		{low, true, "meets"},
		{spans, true, "spans"},
		{high, true, "misses"},
		{high, false, "meets"}, // a lower bound of 1.10x
		{low, false, "misses"},
	} {
		got := describeInterval(c.rs, 1.10, c.below)
		if !strings.Contains(got, c.want) {
			t.Errorf("describeInterval(%v, 1.10, below=%v) = %q; want it to say %q", c.rs, c.below, got, c.want)
		}
	}
	if got := describeInterval(low[:4], 1.10, true); !strings.Contains(got, "too few rounds (4)") {
		t.Errorf("four rounds: %q", got)
	}
}

func TestPairedRatiosPairsRounds(t *testing.T) {
	got := pairedRatios([]float64{2, 3, 8}, []float64{1, 0, 4, 9})
	if len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Fatalf("pairedRatios = %v; want [2 2] (a zero denominator skipped, the extra round ignored)", got)
	}
}
