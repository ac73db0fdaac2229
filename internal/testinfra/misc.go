package testinfra

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"syscall"
	"testing"
)

// Ports handed out by FreePort come from below Linux's ephemeral range
// (32768-60999 by default). A port the kernel picks for ":0" is free now
// but is exactly what the next ":0" bind or outgoing connection anywhere on
// the machine may take a moment later, and a test hands its port to a
// process that binds it seconds later (after a dev server start, whose own
// internal services bind ":0" ports). Below that range only explicit
// binds compete.
const (
	freePortLow  = 20000
	freePortHigh = 32767
)

var (
	freePortMu   sync.Mutex
	freePortNext int
	freePortUsed = map[int]bool{}
)

// FreePort returns a TCP port free on the loopback interface now, outside
// the kernel's ephemeral range, never the same one twice in a test binary.
// Test binaries of different packages start their walk at random points,
// so two of them rarely even try the same port.
func FreePort(t testing.TB) int {
	t.Helper()
	port, err := freePort()
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// FreePortE is FreePort for code that has no testing.TB (a TestMain).
func FreePortE() (int, error) { return freePort() }

func freePort() (int, error) {
	freePortMu.Lock()
	defer freePortMu.Unlock()
	span := freePortHigh - freePortLow + 1
	if freePortNext == 0 {
		freePortNext = freePortLow + rand.IntN(span)
	}
	for range span {
		port := freePortNext
		freePortNext++
		if freePortNext > freePortHigh {
			freePortNext = freePortLow
		}
		if freePortUsed[port] || !loopbackPortFree(port) {
			continue
		}
		freePortUsed[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("testinfra: no free TCP port in %d-%d", freePortLow, freePortHigh)
}

// loopbackPortFree reports whether port can be bound on 127.0.0.1 and on
// ::1 (when the host has IPv6): "localhost" may resolve to either.
func loopbackPortFree(port int) bool {
	for _, host := range []string{"127.0.0.1", "::1"} {
		l, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
		if err != nil {
			if host == "::1" && !errors.Is(err, syscall.EADDRINUSE) {
				continue // no IPv6 loopback here
			}
			return false
		}
		l.Close()
	}
	return true
}

// SyncBuffer is a bytes.Buffer safe for concurrent log writers (the SDK's
// goroutines, activities).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
