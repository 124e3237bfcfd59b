package sdktest

import (
	"bytes"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// streams is what the kit's proxy has seen of the engine streams (HTTP/2
// streams, one per gRPC call) on its connections: when each opened, its
// method, and whether it has ended. A stream ends when either side resets
// it (RST_STREAM), when the engine ends it (END_STREAM from the server:
// the call's trailers), or when its connection closes. So the kit sees an
// abort that is the stream's close, without a hook.
type streams struct {
	pings   atomic.Int32 // the adapter's HTTP/2 PINGs (not acknowledgements)
	goaways atomic.Int32 // the engine's GOAWAYs
	mu      sync.Mutex
	all     []*engineStream // in the order they opened
	changed chan struct{}   // closed and replaced on every change
}

// engineStream is one stream, or a connection that is not HTTP/2, which
// counts as one stream that ends with the connection.
type engineStream struct {
	method string
	ended  bool
}

// conn is one proxied connection's streams, by HTTP/2 stream id.
type conn struct {
	s      *streams
	byID   map[uint32]*engineStream // guarded by s.mu
	closed bool                     // guarded by s.mu
}

func newStreams() *streams { return &streams{changed: make(chan struct{})} }

// changedLocked wakes every waiter.
func (s *streams) changedLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// mark is where streams opened from now on begin, for open.
func (s *streams) mark() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.all)
}

// awaitEnded waits up to d for every stream opened since mark, but
// grpc.health.v1 ones, to end. It returns how many there were and the
// methods of those still open.
func (s *streams) awaitEnded(mark int, d time.Duration) (opened int, open []string) {
	timer := time.NewTimer(d)
	defer timer.Stop()
	for {
		s.mu.Lock()
		opened, open = 0, nil
		for _, st := range s.all[mark:] {
			if strings.HasPrefix(st.method, "/grpc.health.v1.Health/") {
				continue
			}
			opened++
			if !st.ended {
				open = append(open, st.method)
			}
		}
		changed := s.changed
		s.mu.Unlock()
		if len(open) == 0 {
			return opened, nil
		}
		select {
		case <-changed:
		case <-timer.C:
			return opened, open
		}
	}
}

func (s *streams) newConn() *conn { return &conn{s: s, byID: map[uint32]*engineStream{}} }

// open records a new stream of c.
func (c *conn) open(id uint32, method string) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if c.closed || c.byID[id] != nil {
		return
	}
	st := &engineStream{method: method}
	c.byID[id] = st
	c.s.all = append(c.s.all, st)
	c.s.changedLocked()
}

// end records the end of stream id of c.
func (c *conn) end(id uint32) {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	if st := c.byID[id]; st != nil && !st.ended {
		st.ended = true
		c.s.changedLocked()
	}
}

// close ends every stream of c: the connection is gone.
func (c *conn) close() {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	c.closed = true
	for _, st := range c.byID {
		st.ended = true
	}
	c.s.changedLocked()
}

// follow reads what one side of c sends, a copy of the proxied bytes,
// and records the streams it opens and ends: fromClient for the adapter's
// side. It returns when r ends or what it reads is not HTTP/2, draining r.
func (c *conn) follow(r io.Reader, fromClient bool) {
	defer io.Copy(io.Discard, r)
	if fromClient {
		preface := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(r, preface); err != nil {
			return
		}
		if !bytes.Equal(preface, []byte(http2.ClientPreface)) {
			c.open(0, "a connection that is not HTTP/2") // ends with the connection
			return
		}
	}
	fr := http2.NewFramer(nil, r)
	fr.SetMaxReadFrameSize(1<<24 - 1)
	dec := hpack.NewDecoder(4096, nil)
	dec.SetAllowedMaxDynamicTableSize(1 << 20)
	fr.ReadMetaHeaders = dec
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			return
		}
		c.frame(f, fromClient)
	}
}

// frame records what one frame says of its stream.
func (c *conn) frame(f http2.Frame, fromClient bool) {
	id := f.Header().StreamID
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		if fromClient {
			c.open(id, f.PseudoValue("path"))
		} else if f.StreamEnded() {
			c.end(id)
		}
	case *http2.DataFrame:
		if !fromClient && f.StreamEnded() {
			c.end(id)
		}
	case *http2.RSTStreamFrame:
		c.end(id)
	case *http2.PingFrame:
		if fromClient && !f.IsAck() {
			c.s.pings.Add(1)
		}
	case *http2.GoAwayFrame:
		if !fromClient {
			c.s.goaways.Add(1)
		}
	}
}
