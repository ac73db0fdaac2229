package main

import (
	"fmt"
	"math"
	"slices"
)

// medianInterval is a distribution-free confidence interval of at least
// 95% for the median of v: the order statistics x(j) and x(n+1−j) for the
// largest j whose coverage P(j ≤ B ≤ n−j), B ~ Bin(n, ½), is at least 0.95.
// It needs no assumption about how latencies are distributed, which on a
// noisy machine are anything but normal. ok is false below six values,
// where even the extremes cover less than 95%.
func medianInterval(v []float64) (lo, hi float64, ok bool) {
	n := len(v)
	j := 0
	for k := 1; 2*k <= n; k++ {
		if binomialCoverage(n, k) < 0.95 {
			break
		}
		j = k
	}
	if j == 0 {
		return 0, 0, false
	}
	s := slices.Clone(v)
	slices.Sort(s)
	return s[j-1], s[n-j], true
}

// binomialCoverage is P(k ≤ B ≤ n−k) for B ~ Bin(n, ½).
func binomialCoverage(n, k int) float64 {
	tail := 0.0 // P(B < k), the same as P(B > n−k)
	for i := range k {
		tail += math.Exp(logChoose(n, i) - float64(n)*math.Ln2)
	}
	return 1 - 2*tail
}

func logChoose(n, k int) float64 {
	a, _ := math.Lgamma(float64(n + 1))
	b, _ := math.Lgamma(float64(k + 1))
	c, _ := math.Lgamma(float64(n - k + 1))
	return a - b - c
}

// pairedRatios are the per-round ratios num[i]/den[i]: each round's two
// samples ran back to back, so each ratio sees the same load.
func pairedRatios(num, den []float64) []float64 {
	var rs []float64
	for i := range min(len(num), len(den)) {
		if den[i] > 0 {
			rs = append(rs, num[i]/den[i])
		}
	}
	return rs
}

// describeInterval says where a 95% interval of a ratio lies against its
// target: a verdict from one run's ratio of medians can flip with the
// machine's noise, one from the interval only when the gap is real.
// below says the target is an upper bound.
func describeInterval(rs []float64, target float64, below bool) string {
	lo, hi, ok := medianInterval(rs)
	if !ok {
		return fmt.Sprintf("too few rounds (%d) for a 95%% interval", len(rs))
	}
	var where string
	switch {
	case below && hi <= target, !below && lo >= target:
		where = "the whole interval meets the target"
	case below && lo > target, !below && hi < target:
		where = "the whole interval misses the target"
	default:
		where = "the interval spans the target: this run cannot tell"
	}
	return fmt.Sprintf("95%% interval of the per-round median %.2f–%.2fx over %d rounds: %s", lo, hi, len(rs), where)
}
