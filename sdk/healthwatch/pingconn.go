package healthwatch

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
)

// PingConn is one HTTP/2 connection to an engine of its own, for PINGs that
// tell a busy engine from a frozen one (see [Busy]): a busy engine's
// transport answers a PING in milliseconds, off the path of its requests
// (grpc-go answers it from the connection's reader goroutine), while a
// frozen process answers nothing. gRPC's own client cannot send one: it
// clamps keepalive to 10 s or more and pings only on its schedule. The
// connection speaks HTTP/2 frames itself (golang.org/x/net/http2's
// Framer), sending nothing but what is described here.
//
// The connection holds one grpc.health.v1 Watch of service. gRPC servers
// cut off a client that pings too often (grpc-go: a third ping strike, a
// strike being a ping within 5 minutes of the last one with a stream open,
// within 2 hours without; every HEADERS or DATA the server writes clears
// the strikes). The Watch keeps a stream open, its first answer clears the
// strikes, and [PingConn.Renew] opens it again so that the server writes
// once more. A GOAWAY or a closed connection is redialled at the next Ping.
type PingConn struct {
	addr    string
	service string

	mu     sync.Mutex
	cur    *h2conn
	closed bool
}

// NewPingConn returns a PingConn for the engine at addr (host:port,
// plaintext), Watching service. It dials at the first Ping or Renew.
func NewPingConn(addr, service string) *PingConn {
	return &PingConn{addr: addr, service: service}
}

// errPingClosed is Ping's error after Close.
var errPingClosed = errors.New("ping connection closed")

// Ping sends one HTTP/2 PING and waits for its acknowledgement until ctx
// ends, dialling first when there is no open connection.
func (p *PingConn) Ping(ctx context.Context) error {
	c, err := p.conn(ctx)
	if err != nil {
		return err
	}
	if err := c.ping(ctx); err != nil {
		return fmt.Errorf("HTTP/2 PING to %s: %w", p.addr, err)
	}
	return nil
}

// Renew opens the Watch again, so that the server writes on the
// connection (clearing its ping strikes), and ends the old one; it dials
// when there is no open connection. It does not wait for the answer.
func (p *PingConn) Renew(ctx context.Context) error {
	c, err := p.conn(ctx)
	if err != nil {
		return err
	}
	return c.watch(p.service)
}

// Close closes the connection.
func (p *PingConn) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.cur == nil {
		return nil
	}
	return p.cur.nc.Close()
}

// conn returns the open connection, dialling a new one, with its Watch,
// when there is none or the old one was closed or sent GOAWAY.
func (p *PingConn) conn(ctx context.Context) (*h2conn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPingClosed
	}
	if p.cur != nil && p.cur.usable() {
		return p.cur, nil
	}
	if p.cur != nil {
		p.cur.nc.Close()
		p.cur = nil
	}
	var d net.Dialer
	nc, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, fmt.Errorf("dialling %s for HTTP/2 PINGs: %w", p.addr, err)
	}
	c, err := newH2conn(nc, p.addr)
	if err == nil {
		err = c.watch(p.service)
	}
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("HTTP/2 connection to %s for PINGs: %w", p.addr, err)
	}
	p.cur = c
	return c, nil
}

// h2conn is one client HTTP/2 connection: the preface and SETTINGS, one
// Watch stream at a time, PINGs, and what the protocol asks of a reader
// (SETTINGS and PING acknowledgements, flow-control credit).
type h2conn struct {
	nc        net.Conn
	authority string

	wmu    sync.Mutex // guards fr's writes, enc, stream
	fr     *http2.Framer
	enc    *hpack.Encoder
	encBuf bytes.Buffer
	stream uint32 // the Watch's; 0: none yet

	mu      sync.Mutex
	waiters map[[8]byte]chan struct{}
	done    bool // GOAWAY received or the connection failed
}

func newH2conn(nc net.Conn, authority string) (*h2conn, error) {
	c := &h2conn{nc: nc, authority: authority, fr: http2.NewFramer(nc, nc), waiters: map[[8]byte]chan struct{}{}}
	c.enc = hpack.NewEncoder(&c.encBuf)
	if _, err := nc.Write([]byte(http2.ClientPreface)); err != nil {
		return nil, err
	}
	if err := c.fr.WriteSettings(); err != nil {
		return nil, err
	}
	go c.read()
	return c, nil
}

func (c *h2conn) usable() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return !c.done
}

// read handles the server's frames until the connection fails.
func (c *h2conn) read() {
	defer func() {
		c.mu.Lock()
		c.done = true
		c.mu.Unlock()
		c.nc.Close()
	}()
	for {
		f, err := c.fr.ReadFrame()
		if err != nil {
			return
		}
		if err := c.handle(f); err != nil {
			return
		}
	}
}

// handle answers one frame as a client must.
func (c *h2conn) handle(f http2.Frame) error {
	switch f := f.(type) {
	case *http2.SettingsFrame:
		if !f.IsAck() {
			return c.write(func() error { return c.fr.WriteSettingsAck() })
		}
	case *http2.PingFrame:
		if !f.IsAck() {
			return c.write(func() error { return c.fr.WritePing(true, f.Data) })
		}
		c.mu.Lock()
		if w, ok := c.waiters[f.Data]; ok {
			close(w)
			delete(c.waiters, f.Data)
		}
		c.mu.Unlock()
	case *http2.DataFrame:
		// Give the credit back, so the Watch's answers never stall.
		if n := uint32(len(f.Data())); n > 0 {
			return c.write(func() error {
				if err := c.fr.WriteWindowUpdate(0, n); err != nil {
					return err
				}
				return c.fr.WriteWindowUpdate(f.StreamID, n)
			})
		}
	case *http2.GoAwayFrame:
		c.mu.Lock()
		c.done = true // no new Watch here; the next Ping redials
		c.mu.Unlock()
	}
	return nil
}

func (c *h2conn) write(f func() error) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return f()
}

// ping sends a PING with fresh data and waits for its acknowledgement.
func (c *h2conn) ping(ctx context.Context) error {
	var data [8]byte
	_, _ = rand.Read(data[:])
	ack := make(chan struct{})
	c.mu.Lock()
	c.waiters[data] = ack
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.waiters, data)
		c.mu.Unlock()
	}()
	err := c.write(func() error {
		// A frozen peer's full socket buffer must not hold the write past ctx.
		if d, ok := ctx.Deadline(); ok {
			_ = c.nc.SetWriteDeadline(d)
			defer c.nc.SetWriteDeadline(time.Time{})
		}
		return c.fr.WritePing(false, data)
	})
	if err != nil {
		return err
	}
	select {
	case <-ack:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// watch ends the Watch stream, if any, and opens a new one of service.
func (c *h2conn) watch(service string) error {
	msg, err := proto.Marshal(&healthpb.HealthCheckRequest{Service: service})
	if err != nil {
		return err
	}
	body := make([]byte, 5, 5+len(msg)) // gRPC's frame: uncompressed, length
	binary.BigEndian.PutUint32(body[1:], uint32(len(msg)))
	body = append(body, msg...)
	return c.write(func() error {
		if c.stream != 0 {
			if err := c.fr.WriteRSTStream(c.stream, http2.ErrCodeCancel); err != nil {
				return err
			}
		}
		c.stream += 2
		if c.stream == 2 {
			c.stream = 1 // client streams are odd
		}
		c.encBuf.Reset()
		for _, hf := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":authority", c.authority},
			{":path", "/grpc.health.v1.Health/Watch"}, {"content-type", "application/grpc"}, {"te", "trailers"}} {
			_ = c.enc.WriteField(hpack.HeaderField{Name: hf[0], Value: hf[1]})
		}
		if err := c.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: c.stream, BlockFragment: c.encBuf.Bytes(), EndHeaders: true}); err != nil {
			return err
		}
		return c.fr.WriteData(c.stream, true, body)
	})
}
