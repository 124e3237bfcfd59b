package sdktest

import (
	"net"
	"sync"
	"testing"
)

// freezer stands between an adapter and its engine, forwarding TCP
// connections until frozen. Frozen, it moves no byte either way and keeps
// every connection open, new ones too: what a client sees of an engine
// process that is stopped (SIGSTOP) or wedged. So FrozenIsLost needs no
// hook.
type freezer struct {
	lis    net.Listener
	target string
	frozen chan struct{}
	done   chan struct{} // closed when the test ends
	once   sync.Once
	wg     sync.WaitGroup

	mu     sync.Mutex
	conns  []net.Conn
	closed bool
}

// newFreezer forwards a new loopback port to target until t ends.
func newFreezer(t *testing.T, target string) *freezer {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listening for the freezing proxy: %v", err)
	}
	f := &freezer{lis: lis, target: target, frozen: make(chan struct{}), done: make(chan struct{})}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

// addr is the address to give the adapter instead of the engine's.
func (f *freezer) addr() string { return f.lis.Addr().String() }

// freeze stops every byte from now on.
func (f *freezer) freeze() { f.once.Do(func() { close(f.frozen) }) }

func (f *freezer) isFrozen() bool {
	select {
	case <-f.frozen:
		return true
	default:
		return false
	}
}

func (f *freezer) accept() {
	defer f.wg.Done()
	for {
		c, err := f.lis.Accept()
		if err != nil {
			return // closed
		}
		f.track(c)
		if f.isFrozen() {
			continue // accepted by the kernel, never answered
		}
		up, err := net.Dial("tcp", f.target)
		if err != nil {
			c.Close() // the engine is gone: so is the connection
			continue
		}
		f.track(up)
		f.wg.Add(2)
		go f.pipe(up, c)
		go f.pipe(c, up)
	}
}

// track keeps c to be closed when the test ends, or closes it if it has.
func (f *freezer) track(c net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		c.Close()
		return
	}
	f.conns = append(f.conns, c)
}

// pipe copies src to dst until either fails, then closes both, as the end
// of the engine's connection ends the adapter's; once frozen it drops what
// it reads and waits for the test to end.
func (f *freezer) pipe(dst, src net.Conn) {
	defer f.wg.Done()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if f.isFrozen() {
			<-f.done
			return
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				err = werr
			}
		}
		if err != nil {
			dst.Close()
			src.Close()
			return
		}
	}
}

func (f *freezer) close() {
	close(f.done)
	f.lis.Close()
	f.mu.Lock()
	f.closed = true
	for _, c := range f.conns {
		c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
