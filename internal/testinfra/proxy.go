package testinfra

import (
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
)

// TCPProxy forwards a loopback port to a target address and can cut the
// link: an outage of the target (PostgreSQL) for the processes connected
// through it, without touching the target that other tests share.
type TCPProxy struct {
	ln     net.Listener
	target string

	mu    sync.Mutex
	cut   bool
	conns map[net.Conn]struct{}
	wg    sync.WaitGroup
}

// NewTCPProxy listens on a free loopback port and forwards to target until
// the test ends.
func NewTCPProxy(t testing.TB, target string) *TCPProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &TCPProxy{ln: ln, target: target, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	t.Cleanup(p.close)
	return p
}

// Addr is the proxy's host:port.
func (p *TCPProxy) Addr() string { return p.ln.Addr().String() }

// Cut drops every open connection and refuses new ones (accepted, then
// closed at once: the client sees the connection end before the server
// answers, as when PostgreSQL goes down).
func (p *TCPProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for c := range p.conns {
		_ = c.Close()
	}
}

// Restore lets connections through again.
func (p *TCPProxy) Restore() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = false
}

func (p *TCPProxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.mu.Unlock()
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			_ = c.Close()
			continue
		}
		p.mu.Lock()
		if p.cut { // cut while dialling
			p.mu.Unlock()
			_ = c.Close()
			_ = up.Close()
			continue
		}
		p.conns[c], p.conns[up] = struct{}{}, struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, up)
		go p.pipe(up, c)
	}
}

// pipe copies one direction and closes both ends when it stops.
func (p *TCPProxy) pipe(dst, src net.Conn) {
	defer p.wg.Done()
	_, _ = io.Copy(dst, src)
	_ = dst.Close()
	_ = src.Close()
	p.mu.Lock()
	delete(p.conns, dst)
	delete(p.conns, src)
	p.mu.Unlock()
}

func (p *TCPProxy) close() {
	_ = p.ln.Close()
	p.Cut()
	p.wg.Wait()
}

// ThroughProxy rewrites a postgres:// URL to connect through the proxy.
func ThroughProxy(t testing.TB, databaseURL string, p *TCPProxy) string {
	t.Helper()
	u, err := url.Parse(databaseURL)
	if err != nil {
		t.Fatalf("testinfra: database url: %v", err)
	}
	u.Host = p.Addr()
	return u.String()
}
