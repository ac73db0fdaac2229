//go:build !unix

package graph

import "time"

// processCPU reports no CPU clock: cpu-ns/op is not reported.
func processCPU() time.Duration { return -1 }
