package healthwatch

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"

	"golang.org/x/net/http2"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/protobuf/proto"
)

// PingConn is one HTTP/2 connection to an engine of its own, for PINGs that
// tell a busy engine from a frozen one (see [Busy]): a busy engine's
// transport answers a PING in milliseconds, off the path of its requests
// (grpc-go answers it from the connection's reader goroutine), while a
// frozen process answers nothing. gRPC's own client cannot send one: it
// clamps keepalive to 10 s or more and pings only on its schedule.
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
	cc     *http2.ClientConn
	cancel context.CancelFunc // ends the Watch
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
	cc, err := p.conn(ctx)
	if err != nil {
		return err
	}
	if err := cc.Ping(ctx); err != nil {
		return fmt.Errorf("HTTP/2 PING to %s: %w", p.addr, err)
	}
	return nil
}

// Renew opens the Watch again, so that the server writes on the
// connection (clearing its ping strikes), and ends the old one. It returns
// once the new Watch is sent; it does not wait for the answer.
func (p *PingConn) Renew(ctx context.Context) error {
	cc, err := p.conn(ctx)
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cc != cc || p.closed {
		return nil // redialled meanwhile: that one has a fresh Watch
	}
	p.cancel()
	p.cancel = p.watch(cc)
	return nil
}

// Close ends the Watch and closes the connection.
func (p *PingConn) Close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	if p.cc == nil {
		return nil
	}
	p.cancel()
	return p.cc.Close()
}

// conn returns the open connection, dialling a new one, with its Watch,
// when there is none or the old one was closed or sent GOAWAY.
func (p *PingConn) conn(ctx context.Context) (*http2.ClientConn, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return nil, errPingClosed
	}
	if p.cc != nil {
		if st := p.cc.State(); !st.Closed && !st.Closing {
			return p.cc, nil
		}
		p.cancel()
		p.cc.Close()
		p.cc = nil
	}
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", p.addr)
	if err != nil {
		return nil, fmt.Errorf("dialling %s for HTTP/2 PINGs: %w", p.addr, err)
	}
	t := &http2.Transport{AllowHTTP: true}
	//lint:ignore SA1019 net/http's ClientConn has no Ping; x/net's is the one that does.
	cc, err := t.NewClientConn(c)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("HTTP/2 connection to %s for PINGs: %w", p.addr, err)
	}
	p.cc = cc
	p.cancel = p.watch(cc)
	return cc, nil
}

// watch opens a Watch of p.service on cc and reads it until it ends or
// the returned cancel is called. Its answers are not needed: the stream is.
func (p *PingConn) watch(cc *http2.ClientConn) context.CancelFunc {
	ctx, cancel := context.WithCancel(context.Background())
	msg, _ := proto.Marshal(&healthpb.HealthCheckRequest{Service: p.service})
	body := make([]byte, 5, 5+len(msg)) // gRPC's frame: uncompressed, length
	binary.BigEndian.PutUint32(body[1:], uint32(len(msg)))
	body = append(body, msg...)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+p.addr+"/grpc.health.v1.Health/Watch", bytes.NewReader(body))
	if err != nil {
		return cancel
	}
	req.Header.Set("Content-Type", "application/grpc")
	req.Header.Set("Te", "trailers")
	go func() {
		resp, err := cc.RoundTrip(req)
		if err != nil {
			return
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}()
	return cancel
}
