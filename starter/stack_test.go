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

// stackMoved reports whether use, called on a fresh goroutine after grow
// (nil: none), moved the goroutine's stack: Go copies a stack to grow it,
// so a local's address changes exactly when it grew.
func stackMoved(grow, use func()) bool {
	moved := make(chan bool)
	go func() {
		var mark byte
		if grow != nil {
			grow()
		}
		before := uintptr(unsafe.Pointer(&mark))
		use()
		moved <- uintptr(unsafe.Pointer(&mark)) != before
	}()
	return <-moved
}

// TestGrowStackMakesRoomInOneGrowth: after growStack, a call needing
// about what the SDK's payload visit needs runs without growing the stack
// again, and after growEnqueueStack so does the start's own growStack
// about 10 KiB of frames down (requestDepth); without them, the same calls
// on a fresh goroutine do grow it (so the measurement can tell, and the
// pads are not optimized away).
func TestGrowStackMakesRoomInOneGrowth(t *testing.T) {
	start := func() { deep(requestDepth, func() error { growStack(); return nil }) }
	if !stackMoved(nil, useStack) || !stackMoved(nil, start) {
		t.Fatalf("a fresh goroutine ran a %d-byte frame without growing its stack: this test cannot tell growStack works", visitLikeBytes)
	}
	if stackMoved(growStack, useStack) {
		t.Fatalf("the stack grew below growStack: it does not reserve %d bytes", visitLikeBytes)
	}
	if stackMoved(growEnqueueStack, start) {
		t.Fatalf("the start's growStack grew the stack below growEnqueueStack: it does not reserve enough for it")
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
