package starter

import (
	"context"
	"testing"
	"unsafe"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/api/proxy"
	sdkpb "go.temporal.io/api/sdk/v1"
	"go.temporal.io/api/workflowservice/v1"
)

// visitLikeBytes is what a call below growStack may use without the
// stack growing again: about the SDK visitor's three levels (stack.go).
const visitLikeBytes = 32 << 10

// useStack needs visitLikeBytes of stack, as the visit of a start does.
//
//go:noinline
func useStack() {
	var pad [visitLikeBytes]byte
	touchStack(pad[:])
}

// stackMoved reports whether useStack, called on a fresh goroutine (after
// growStack when grow), moved the goroutine's stack: Go copies a stack to
// grow it, so a local's address changes exactly when it grew.
func stackMoved(grow bool) bool {
	moved := make(chan bool)
	go func() {
		var mark byte
		if grow {
			growStack()
		}
		before := uintptr(unsafe.Pointer(&mark))
		useStack()
		moved <- uintptr(unsafe.Pointer(&mark)) != before
	}()
	return <-moved
}

// TestGrowStackMakesRoomInOneGrowth: after growStack, a call needing
// about what the SDK's payload visit needs runs without growing the stack
// again; without it, the same call on a fresh goroutine does grow it (so
// the measurement can tell, and the pad is not optimized away).
func TestGrowStackMakesRoomInOneGrowth(t *testing.T) {
	if !stackMoved(false) {
		t.Fatalf("a fresh goroutine ran a %d-byte frame without growing its stack: this test cannot tell growStack works", visitLikeBytes)
	}
	if stackMoved(true) {
		t.Fatalf("the stack grew below growStack: it does not reserve %d bytes", visitLikeBytes)
	}
}

// BenchmarkVisitStart is the Temporal SDK's payload visit of a start like
// the starter's (input, four search attributes, summary and details) on a
// fresh goroutine below a request-deep stack, as an enqueue runs it: as
// the SDK leaves it ("as-is") and after growStack ("grown").
//
//	go test ./starter -run '^$' -bench VisitStart -benchmem
func BenchmarkVisitStart(b *testing.B) {
	payload := func(s string) *commonpb.Payload {
		return &commonpb.Payload{Metadata: map[string][]byte{"encoding": []byte("json/plain")}, Data: []byte(s)}
	}
	req := &workflowservice.StartWorkflowExecutionRequest{
		Namespace: "default", WorkflowId: "weft-chain10-0123", Input: &commonpb.Payloads{Payloads: []*commonpb.Payload{payload(`{"input":{"inline":{"n":42}}}`)}},
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
			"WeftTenant": payload(`"t"`), "WeftWorkflowKey": payload(`"chain10"`), "WeftMode": payload(`"live"`), "WeftRevision": payload(`1`)}},
		UserMetadata: &sdkpb.UserMetadata{Summary: payload(`"chain10 r1 · live"`), Details: payload(`"run 0123 · origin api · actor bench"`)},
	}
	opts := proxy.VisitPayloadsOptions{Visitor: func(_ *proxy.VisitPayloadsContext, p []*commonpb.Payload) ([]*commonpb.Payload, error) { return p, nil }}
	for _, grow := range []bool{false, true} {
		name := "as-is"
		if grow {
			name = "grown"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				done := make(chan error)
				go func() {
					done <- deep(requestDepth, func() error {
						if grow {
							growStack()
						}
						return proxy.VisitPayloads(context.Background(), req, opts)
					})
				}()
				if err := <-done; err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// requestDepth is about the frames an enqueue's request has above the
// start: HTTP server, middleware, handler, starter.
const requestDepth = 40

// deep calls f below n more frames of about 200 bytes each.
//
//go:noinline
func deep(n int, f func() error) error {
	var pad [192]byte
	touchStack(pad[:])
	if n == 0 {
		return f()
	}
	return deep(n-1, f)
}
