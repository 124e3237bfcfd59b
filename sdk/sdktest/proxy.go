package sdktest

import (
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// proxy stands between an adapter and its engine, forwarding TCP
// connections, so that the kit can make any engine slow or frozen without
// a hook. Slow, it delivers every byte a fixed latency after it arrived.
// Frozen, it moves no byte either way and keeps every connection open, new
// ones too: what a client sees of an engine process that is stopped
// (SIGSTOP) or wedged. It also follows the engine streams on its
// connections (see streams).
type proxy struct {
	streams *streams
	lis     net.Listener
	target  string
	latency atomic.Int64 // time.Duration each byte waits, one way
	frozen  chan struct{}
	done    chan struct{} // closed when the test ends
	once    sync.Once
	wg      sync.WaitGroup

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// newProxy forwards a new loopback port to target until t ends.
func newProxy(t tb, target string) *proxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening for the kit's proxy: %v", err)
	}
	p := &proxy{lis: lis, target: target, frozen: make(chan struct{}), done: make(chan struct{}), streams: newStreams()}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// addr is the address to give the adapter instead of the engine's.
func (p *proxy) addr() string { return p.lis.Addr().String() }

// slow delays every byte from now on by d each way.
func (p *proxy) slow(d time.Duration) { p.latency.Store(int64(d)) }

// freeze stops every byte from now on.
func (p *proxy) freeze() { p.once.Do(func() { close(p.frozen) }) }

func (p *proxy) isFrozen() bool {
	select {
	case <-p.frozen:
		return true
	default:
		return false
	}
}

func (p *proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return // closed
		}
		p.track(c)
		if p.isFrozen() {
			continue // accepted by the kernel, never answered
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close() // the engine is gone: so is the connection
			continue
		}
		p.track(up)
		cn := p.streams.newConn()
		p.wg.Add(2)
		go p.pipe(up, c, cn, true)
		go p.pipe(c, up, cn, false)
	}
}

// track keeps c to be closed when the test ends, or closes it if it has.
func (p *proxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		c.Close()
		return
	}
	p.conns = append(p.conns, c)
}

// piece is bytes read from one side, due at the other.
type piece struct {
	b   []byte
	due time.Time
}

// pipe copies src to dst, each piece the latency after it was read, until
// either side fails; then it closes both, as the end of the engine's
// connection ends the adapter's. Once frozen it drops what it reads and
// waits for the test to end. What it forwards, cn follows: fromClient
// says src is the adapter's side.
func (p *proxy) pipe(dst, src net.Conn, cn *conn, fromClient bool) {
	defer p.wg.Done()
	observed, observe := io.Pipe()
	p.wg.Go(func() { cn.follow(observed, fromClient) })
	defer func() {
		observe.Close()
		cn.close() // the connection is gone, and its streams with it
	}()
	pieces := make(chan piece, 64)
	written := make(chan struct{})
	go func() {
		defer close(written)
		for pc := range pieces {
			if wait := time.Until(pc.due); wait > 0 {
				time.Sleep(wait) // the latency itself
			}
			if p.isFrozen() {
				continue
			}
			if _, err := dst.Write(pc.b); err != nil {
				break
			}
		}
		dst.Close()
		src.Close()
	}()
	defer func() {
		close(pieces)
		<-written
	}()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if p.isFrozen() {
			<-p.done
			return
		}
		if n > 0 {
			_, _ = observe.Write(buf[:n])
			due := time.Now().Add(time.Duration(p.latency.Load()))
			select {
			case pieces <- piece{append([]byte(nil), buf[:n]...), due}:
			case <-written: // dst failed
				return
			}
		}
		if err != nil {
			return
		}
	}
}

func (p *proxy) close() {
	close(p.done)
	p.lis.Close()
	p.mu.Lock()
	p.closed = true
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
