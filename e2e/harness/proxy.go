package harness

import (
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Fault is what a Proxy does to the connections it accepts.
type Fault int

const (
	// Pass forwards every connection to the backend.
	Pass Fault = iota
	// Refuse resets each new connection at once, as a host with nothing
	// listening does.
	Refuse
	// Blackhole accepts new connections and never answers: their bytes
	// are read and dropped, as a network partition looks to a client.
	Blackhole
)

func (f Fault) String() string {
	switch f {
	case Pass:
		return "pass"
	case Refuse:
		return "refuse"
	case Blackhole:
		return "blackhole"
	}
	return fmt.Sprintf("Fault(%d)", int(f))
}

// Proxy is a TCP proxy on a loopback port between clients and a backend,
// with faults a test turns on and off: connections refused or
// black-holed, open connections cut, every byte sent to the backend
// delayed, the backend moved.
type Proxy struct {
	// Addr is the address clients connect to.
	Addr string
	lis  net.Listener

	up atomic.Int64 // bytes delivered to the backend

	mu      sync.Mutex
	backend string
	fault   Fault
	latency time.Duration
	conns   map[net.Conn]struct{} // accepted, not yet closed
	closed  bool
	wg      sync.WaitGroup
}

// StartProxy listens on a fresh loopback port and forwards to backend
// until Close.
func StartProxy(backend string) (*Proxy, error) {
	a, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	lis, err := net.Listen("tcp", a)
	if err != nil {
		return nil, fmt.Errorf("proxy: %w", err)
	}
	p := &Proxy{Addr: lis.Addr().String(), lis: lis, backend: backend, conns: map[net.Conn]struct{}{}}
	p.wg.Add(1)
	go p.serve()
	return p, nil
}

// Sent is the number of bytes clients have sent through to the backend.
func (p *Proxy) Sent() int64 { return p.up.Load() }

// SetFault applies f to new connections and cuts the open ones when f is
// not Pass.
func (p *Proxy) SetFault(f Fault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fault = f
	if f != Pass {
		p.cutLocked()
	}
}

// SetLatency delays each byte sent to the backend by d from now on, on
// open connections too; bytes keep their order.
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.latency = d
}

// MoveTo sends new connections to backend and cuts the open ones: their
// clients connect again, and reach backend.
func (p *Proxy) MoveTo(backend string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.backend = backend
	p.cutLocked()
}

// Cut closes every open connection.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cutLocked()
}

func (p *Proxy) cutLocked() {
	for c := range p.conns {
		c.Close()
	}
}

// Close stops listening, cuts every connection and waits for the
// proxy's goroutines. It is safe to call more than once.
func (p *Proxy) Close() {
	p.mu.Lock()
	p.closed = true
	p.lis.Close()
	p.cutLocked()
	p.mu.Unlock()
	p.wg.Wait()
}

func (p *Proxy) serve() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.Close()
			return
		}
		fault, backend := p.fault, p.backend
		if fault == Refuse {
			p.mu.Unlock()
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // close with a reset, not a clean end
			}
			c.Close()
			continue
		}
		p.conns[c] = struct{}{}
		p.wg.Add(1)
		p.mu.Unlock()
		go func() {
			defer p.wg.Done()
			defer p.forget(c)
			if fault == Blackhole {
				_, _ = io.Copy(io.Discard, c)
				return
			}
			p.pipe(c, backend)
		}()
	}
}

func (p *Proxy) forget(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
	c.Close()
}

// pipe copies both ways, delaying what goes to the backend, until either
// side ends; then it closes both.
func (p *Proxy) pipe(c net.Conn, backend string) {
	b, err := net.DialTimeout("tcp", backend, 5*time.Second)
	if err != nil {
		return
	}
	defer b.Close()
	done := make(chan struct{}, 2)
	go func() { p.delayed(b, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, b); done <- struct{}{} }()
	<-done
	c.Close()
	b.Close()
	<-done
}

// chunk is data read from a client, due at the backend at due.
type chunk struct {
	data []byte
	due  time.Time
}

// delayed copies src to dst, each read reaching dst the latency of the
// moment it was read later. What was read before src ended is still
// delivered: a request already sent reaches the backend even when its
// client has given up.
func (p *Proxy) delayed(dst, src net.Conn) {
	q := make(chan chunk, 64)
	go func() {
		defer close(q)
		for {
			buf := make([]byte, 32<<10)
			n, err := src.Read(buf)
			if n > 0 {
				p.mu.Lock()
				due := time.Now().Add(p.latency)
				p.mu.Unlock()
				q <- chunk{buf[:n], due}
			}
			if err != nil {
				return
			}
		}
	}()
	for ch := range q {
		if d := time.Until(ch.due); d > 0 {
			time.Sleep(d) // the delay line itself, not a synchronisation
		}
		n, err := dst.Write(ch.data)
		p.up.Add(int64(n))
		if err != nil {
			for range q { // let the reader finish
			}
			return
		}
	}
}
