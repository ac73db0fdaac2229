package graph

import (
	"testing"
	"time"
)

// cpuMeter reports the process CPU time (user + system, so GC workers
// count) spent per iteration as "cpu-ns/op". The machine these benchmarks
// run on is shared, so wall-clock ns/op includes time spent waiting for a
// core; CPU time per op does not.
type cpuMeter struct{ start time.Duration }

func startCPU() cpuMeter { return cpuMeter{processCPU()} }

func (m cpuMeter) report(b *testing.B) {
	if m.start < 0 || b.N == 0 { // no CPU clock on this platform
		return
	}
	b.ReportMetric(float64(processCPU()-m.start)/float64(b.N), "cpu-ns/op")
}
