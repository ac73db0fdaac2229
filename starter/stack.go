package starter

// The Temporal SDK checks every outbound payload of a start with
// go.temporal.io/api/proxy.VisitPayloads (its payload limits), whose
// generated visitPayloads has a stack frame of about 8 KiB and recurses
// once per nested message holding payloads: a start carrying an input,
// search attributes and user metadata (summary, details) goes three levels
// deep, about 24 KiB of stack. An enqueue calls it at the bottom of a
// request's stack (HTTP server, middleware, handler, starter), on a
// goroutine of its own (a connection's or request's), whose stack starts
// small and is shrunk by every GC. Left to itself the stack grows once per
// level, and each growth is expensive here: the runtime sizes it by
// scanning the whole stack-pointer table of the function that overflowed
// (runtime.funcMaxSPDelta over the visitor, one of the largest functions
// in the binary) and copies every frame of the request's stack. In
// weftbench's enqueue section that was about a fifth of this process's CPU
// per enqueue (docs/benchmarks.md, "Session 10: enqueue").
//
// growStack makes room for the whole visit in ONE growth, taken by a
// small function whose table is scanned in no time, before the SDK is
// called. A goroutine whose stack is large enough already pays only the
// zeroing of the pad (a microsecond or two). growEnqueueStack does the same
// for a whole enqueue at its entry, while the stack holds few frames to
// copy: the input's hash and schema check, the statement's encoding and
// scan and the start below it then grow nothing.

// startStackBytes is the stack growStack reserves below its caller: the
// visitor's three levels and the SDK's and gRPC's frames under them.
const startStackBytes = 40 << 10

// growStack grows the calling goroutine's stack, if needed, so that
// startStackBytes more fit below the caller's frame.
//
//go:noinline
func growStack() {
	var pad [startStackBytes]byte
	touchStack(pad[:])
}

// touchStack uses the pad, so the compiler keeps growStack's frame.
//
//go:noinline
func touchStack(b []byte) { b[0], b[len(b)-1] = 1, 1 }

// enqueueStackBytes is the stack growEnqueueStack reserves: the
// enqueue's own frames down to the start (about 10 KiB) and the start's
// reservation below them, so a stack grown here to 64 KiB (a request's
// frames above Enqueue take a few KiB) needs no other growth.
const enqueueStackBytes = 48 << 10

// growEnqueueStack grows the calling goroutine's stack, if needed, so that
// enqueueStackBytes more fit below the caller's frame.
//
//go:noinline
func growEnqueueStack() {
	var pad [enqueueStackBytes]byte
	touchStack(pad[:])
}
