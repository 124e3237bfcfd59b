package healthwatch_test

import (
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/vigilhq/vigil/sdk"
	"github.com/vigilhq/vigil/sdk/healthwatch"
)

// busyCheck is grpc-go's health server whose Check, while busy, answers
// only after delay, as an engine stalled by a long prefill does: its
// handler is held, its transport is not.
type busyCheck struct {
	*health.Server
	busy  atomic.Bool
	delay time.Duration
}

func (h *busyCheck) Check(ctx context.Context, req *healthpb.HealthCheckRequest) (*healthpb.HealthCheckResponse, error) {
	if h.busy.Load() {
		select {
		case <-time.After(h.delay):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	return h.Server.Check(ctx, req)
}

// frameProxy is a TCP proxy in front of an HTTP/2 server that reads the
// frames going through: it counts each connection's PINGs (not their
// acknowledgements) and the server's GOAWAYs, and freezes, moving no byte
// either way while every connection stays open, as a stopped process looks.
type frameProxy struct {
	lis    net.Listener
	frozen chan struct{}

	mu    sync.Mutex
	conns []*proxied
}

type proxied struct {
	pings  atomic.Int32
	goaway atomic.Value // string: the GOAWAY's debug data
}

func newFrameProxy(t *testing.T, upstream string) *frameProxy {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &frameProxy{lis: lis, frozen: make(chan struct{})}
	var wg sync.WaitGroup
	done := make(chan struct{})
	t.Cleanup(func() {
		close(done)
		lis.Close()
		wg.Wait()
	})
	wg.Go(func() {
		for {
			c, err := lis.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", upstream)
			if err != nil {
				c.Close()
				continue
			}
			pc := &proxied{}
			p.mu.Lock()
			p.conns = append(p.conns, pc)
			p.mu.Unlock()
			wg.Go(func() { <-done; c.Close(); u.Close() })
			wg.Go(func() { p.copy(u, c, pc, true, done) })
			wg.Go(func() { p.copy(c, u, pc, false, done) })
		}
	})
	return p
}

func (p *frameProxy) addr() string { return p.lis.Addr().String() }

// copy forwards frames from src to dst; fromClient: src is the client,
// whose connection starts with the 24-byte preface.
func (p *frameProxy) copy(dst io.Writer, src io.Reader, pc *proxied, fromClient bool, done <-chan struct{}) {
	if fromClient {
		if _, err := io.CopyN(dst, src, 24); err != nil {
			return
		}
	}
	hdr := make([]byte, 9)
	for {
		if _, err := io.ReadFull(src, hdr); err != nil {
			return
		}
		payload := make([]byte, int(hdr[0])<<16|int(hdr[1])<<8|int(hdr[2]))
		if _, err := io.ReadFull(src, payload); err != nil {
			return
		}
		const ping, goaway, ack = 0x6, 0x7, 0x1
		switch {
		case hdr[3] == ping && hdr[4]&ack == 0 && fromClient:
			pc.pings.Add(1)
		case hdr[3] == goaway && !fromClient && len(payload) >= 8:
			pc.goaway.Store(fmt.Sprintf("%s (code %d)", payload[8:], binary.BigEndian.Uint32(payload[4:8])))
		}
		select {
		case <-p.frozen:
			<-done // frozen: this frame and every later one stay here
			return
		default:
		}
		if _, err := dst.Write(append(hdr, payload...)); err != nil {
			return
		}
	}
}

// stats returns the PINGs of every connection and the GOAWAYs sent.
func (p *frameProxy) stats() (pings []int, goaways []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		pings = append(pings, int(c.pings.Load()))
		if g, ok := c.goaway.Load().(string); ok {
			goaways = append(goaways, g)
		}
	}
	return pings, goaways
}

// totalPings is the sum of pings.
func totalPings(pings []int) (n int) {
	for _, p := range pings {
		n += p
	}
	return n
}

// watchBusy serves h with grpc-go's default keepalive enforcement behind
// a frameProxy and starts healthwatch.WatchBusy of "" through it, with a
// PingConn of its own to the proxy.
func watchBusy(t *testing.T, h healthpb.HealthServer, policy sdk.HealthPolicy) (<-chan healthwatch.Update, *healthwatch.Busy, *frameProxy) {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	healthpb.RegisterHealthServer(srv, h)
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(lis)
	}()
	t.Cleanup(func() {
		srv.Stop()
		<-served
	})
	p := newFrameProxy(t, lis.Addr().String())
	// A static window turns off grpc-go's BDP pings, as adapterkit.Dial
	// does: the proxy then counts Busy's PINGs alone.
	conn, err := grpc.NewClient(p.addr(), grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(1<<20), grpc.WithInitialConnWindowSize(1<<20))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	pings := healthwatch.NewPingConn(p.addr(), "")
	// Dialled before the watch, as adapterkit does at Start.
	if err := pings.Renew(t.Context()); err != nil {
		t.Fatal(err)
	}
	busy := healthwatch.NewBusy(policy, pings)
	ctx, cancel := context.WithCancel(t.Context())
	updates := healthwatch.WatchBusy(ctx, conn, "", policy, busy)
	t.Cleanup(func() {
		cancel()
		for range updates {
		}
		pings.Close()
	})
	return updates, busy, p
}

// newBusyCheck is a busyCheck serving "", not busy yet.
func newBusyCheck(delay time.Duration) *busyCheck {
	h := &busyCheck{Server: health.NewServer(), delay: delay}
	h.SetServingStatus("", serving)
	return h
}

// noUpdate fails t when an update comes within d.
func noUpdate(t *testing.T, updates <-chan healthwatch.Update, d time.Duration, why string) {
	t.Helper()
	select {
	case u := <-updates:
		t.Fatalf("update {Status: %v, Err: %v} %s, want none", u.Status, u.Err, why)
	case <-time.After(d):
	}
}

// busyState waits until busy reports want.
func busyState(t *testing.T, busy *healthwatch.Busy, want bool) {
	t.Helper()
	deadline := time.After(within)
	for {
		if got, _ := busy.State(); got == want {
			return
		}
		select {
		case <-busy.Changed():
		case <-deadline:
			t.Fatalf("Busy.State() not %v within %v", want, within)
		}
	}
}

// TestBusyIsNotAFailure: Checks that time out while the connection answers
// PINGs are busy, not failed, even with Failures 1; the answers after it
// end the episode.
func TestBusyIsNotAFailure(t *testing.T) {
	t.Parallel()
	policy := sdk.HealthPolicy{Interval: 20 * time.Millisecond, Timeout: 100 * time.Millisecond, Failures: 1, BusyTimeout: 5 * time.Second}
	h := newBusyCheck(300 * time.Millisecond)
	updates, busy, p := watchBusy(t, h, policy)
	nextStatus(t, updates, serving)
	h.busy.Store(true)
	busyState(t, busy, true)
	noUpdate(t, updates, 10*policy.Timeout, "while the engine is busy")
	h.busy.Store(false)
	busyState(t, busy, false)
	pings, goaways := p.stats()
	if n := totalPings(pings); n < 1 || n > healthwatch.MaxBusyPings {
		t.Errorf("PINGs sent in one busy episode = %d (per connection %v), want 1 to %d", n, pings, healthwatch.MaxBusyPings)
	}
	if len(goaways) > 0 {
		t.Errorf("GOAWAYs from the server: %q, want none", goaways)
	}
	if _, episodes := busy.State(); episodes != 1 {
		t.Errorf("busy episodes = %d, want 1", episodes)
	}
}

// TestBusyFrozen: a frozen server answers neither Checks nor the PING: it
// is found within Interval + Failures*Timeout + Timeout/4 (one PING), and
// only one PING is sent.
func TestBusyFrozen(t *testing.T) {
	t.Parallel()
	policy := sdk.HealthPolicy{Interval: 50 * time.Millisecond, Timeout: 200 * time.Millisecond, Failures: 2}
	updates, _, p := watchBusy(t, newBusyCheck(0), policy)
	nextStatus(t, updates, serving)
	start := time.Now()
	close(p.frozen)
	u := next(t, updates)
	took := time.Since(start)
	if u.Err == nil || !strings.Contains(u.Err.Error(), "PING") {
		t.Fatalf("update = {Status: %v, Err: %v}, want an Err naming the unanswered PING", u.Status, u.Err)
	}
	bound := policy.Interval + time.Duration(policy.Failures)*policy.Timeout + policy.Timeout/4
	if slack := 2 * time.Second; took > bound+slack {
		t.Errorf("frozen server found after %v, want within %v (and %v slack)", took, bound, slack)
	}
	if pings, _ := p.stats(); totalPings(pings) != 1 {
		t.Errorf("PINGs sent to a frozen server = %v per connection, want 1 in all", pings)
	}
	t.Logf("frozen server found after %v (bound %v): %v", took, bound, u.Err)
}

// TestBusyTimeout: an engine busy for longer than BusyTimeout is lost after
// it, having had at most MaxBusyPings PINGs.
func TestBusyTimeout(t *testing.T) {
	t.Parallel()
	policy := sdk.HealthPolicy{Interval: 20 * time.Millisecond, Timeout: 100 * time.Millisecond, Failures: 2, BusyTimeout: 900 * time.Millisecond}
	h := newBusyCheck(time.Hour)
	updates, _, p := watchBusy(t, h, policy)
	nextStatus(t, updates, serving)
	start := time.Now()
	h.busy.Store(true)
	u := next(t, updates)
	took := time.Since(start)
	if u.Err == nil || !strings.Contains(u.Err.Error(), "busy timeout") {
		t.Fatalf("update = {Status: %v, Err: %v}, want an Err naming the busy timeout", u.Status, u.Err)
	}
	if took < policy.BusyTimeout {
		t.Errorf("busy engine lost after %v, want not before BusyTimeout %v", took, policy.BusyTimeout)
	}
	if pings, _ := p.stats(); totalPings(pings) > healthwatch.MaxBusyPings || totalPings(pings) < 2 {
		t.Errorf("PINGs in one busy episode = %v per connection, want 2 to %d in all", pings, healthwatch.MaxBusyPings)
	}
}

// TestBusyNoGoaway is the policy test against grpc-go's default keepalive
// enforcement (a GOAWAY too_many_pings at the third ping strike; a strike
// is a ping within 5 minutes of the last with a stream open). It runs two
// episodes of "40 s" busy at a tenth of the scale (Timeout 100ms, Interval
// 50ms, BusyTimeout 6s, busy 4s each): the server's window is 5 minutes,
// far longer than either, so it counts the same PINGs as at full scale.
// More than MaxBusyPings PINGs on one connection with no GOAWAY shows the
// renewal between episodes clearing the strikes.
func TestBusyNoGoaway(t *testing.T) {
	t.Parallel()
	policy := sdk.HealthPolicy{Interval: 50 * time.Millisecond, Timeout: 100 * time.Millisecond, Failures: 2, BusyTimeout: 6 * time.Second}
	h := newBusyCheck(time.Hour)
	updates, busy, p := watchBusy(t, h, policy)
	nextStatus(t, updates, serving)
	for range 2 {
		h.busy.Store(true)
		busyState(t, busy, true)
		noUpdate(t, updates, 4*time.Second, "while the engine is busy")
		h.busy.Store(false)
		busyState(t, busy, false)
		noUpdate(t, updates, 300*time.Millisecond, "once the engine answers again")
	}
	pings, goaways := p.stats()
	if len(goaways) > 0 {
		t.Errorf("GOAWAYs from the server: %q, want none", goaways)
	}
	most := 0
	for _, n := range pings {
		most = max(most, n)
	}
	if most <= healthwatch.MaxBusyPings || most > 2*healthwatch.MaxBusyPings {
		t.Errorf("PINGs per connection = %v, want one connection with %d to %d (two episodes)", pings, healthwatch.MaxBusyPings+1, 2*healthwatch.MaxBusyPings)
	}
	t.Logf("PINGs per connection: %v", pings)
}
