package main

import (
	"bufio"
	"context"
	"crypto/rand"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/consul/api"
	"github.com/vigilhq/vigil/bench/internal/load"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// standIn is one of B8's in-process stand-in workers: a loopback listener
// of its own (the router keys workers by address) served by a gRPC server
// shared with the others, and a Consul registration the driver keeps.
type standIn struct {
	id, model, addr string
	owner           string // random, as a vigil run's owner token
	lis             net.Listener
	ttft            time.Duration // wait before the one token
	requests        atomic.Int64
	lastRecv        atomic.Int64 // unix ns of the last request received
}

// standInFleet is a set of stand-ins registered under one service.
type standInFleet struct {
	service string
	agent   *api.Agent
	srv     *grpc.Server
	workers []*standIn
	byAddr  map[string]*standIn

	mu         sync.Mutex
	registered map[*standIn]bool
	stop       chan struct{}
	done       sync.WaitGroup
}

const (
	// standInTTL is the TTL of a stand-in's check; the driver passes every
	// check a third of it apart.
	standInTTL = 30 * time.Second
	// registerParallel bounds the concurrent Consul calls of a fleet.
	registerParallel = 16
)

// startStandIns listens on n loopback ports, serving the Worker API on
// each, the i-th worker serving models[i%len(models)] after ttft(i). It
// registers none.
func startStandIns(agent *api.Agent, service string, n int, models []string, ttft func(i int) time.Duration) (*standInFleet, error) {
	f := &standInFleet{service: service, agent: agent, srv: grpc.NewServer(), byAddr: map[string]*standIn{},
		registered: map[*standIn]bool{}, stop: make(chan struct{})}
	workerv1.RegisterWorkerServer(f.srv, standInServer{f: f})
	for i := range n {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			f.close()
			return nil, fmt.Errorf("stand-in %d of %d: %w", i+1, n, err)
		}
		w := &standIn{id: fmt.Sprintf("%s-%d", service, i), owner: rand.Text(), model: models[i%len(models)], addr: lis.Addr().String(),
			lis: lis, ttft: ttft(i)}
		f.workers = append(f.workers, w)
		f.byAddr[w.addr] = w
		go f.srv.Serve(lis) //nolint:errcheck // ends with Stop
	}
	f.done.Add(1)
	go f.heartbeat()
	return f, nil
}

// close deregisters every stand-in still registered and stops serving.
func (f *standInFleet) close() {
	close(f.stop)
	f.done.Wait()
	f.mu.Lock()
	var left []*standIn
	for w := range f.registered {
		left = append(left, w)
	}
	f.mu.Unlock()
	_ = f.each(left, f.deregister)
	f.srv.Stop()
	for _, w := range f.workers {
		w.lis.Close()
	}
}

func (f *standInFleet) checkID(w *standIn) string { return "b8:" + w.id }

// register adds w to Consul with its TTL check passing.
func (f *standInFleet) register(w *standIn) error {
	host, port, _ := net.SplitHostPort(w.addr)
	var p int
	fmt.Sscan(port, &p)
	err := f.agent.ServiceRegister(&api.AgentServiceRegistration{
		ID: w.id, Name: f.service, Tags: []string{"stand-in"}, Address: host, Port: p,
		// Every key a vigil publishes (the router leaves out a registration
		// that lacks one), with an owner token random per run as vigil's.
		Meta: map[string]string{"engine": "stand-in", "model": w.model, "model_id": w.model, "instance_id": w.id,
			"worker_id": w.id, "prompts": "text,token_ids", "max_model_len": "0", "owner": w.owner},
		Check: &api.AgentServiceCheck{CheckID: f.checkID(w), TTL: standInTTL.String(), Status: api.HealthPassing,
			DeregisterCriticalServiceAfter: "1m"},
	})
	if err != nil {
		return fmt.Errorf("registering stand-in %s: %w", w.id, err)
	}
	f.mu.Lock()
	f.registered[w] = true
	f.mu.Unlock()
	return nil
}

// deregister removes w from Consul.
func (f *standInFleet) deregister(w *standIn) error {
	f.mu.Lock()
	delete(f.registered, w)
	f.mu.Unlock()
	if err := f.agent.ServiceDeregister(w.id); err != nil {
		return fmt.Errorf("deregistering stand-in %s: %w", w.id, err)
	}
	return nil
}

// each calls fn for every worker of ws, registerParallel at a time, and
// returns the first error.
func (f *standInFleet) each(ws []*standIn, fn func(*standIn) error) error {
	sem := make(chan struct{}, registerParallel)
	var first error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, w := range ws {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(w); err != nil {
				mu.Lock()
				first = cmpOr(first, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// heartbeat passes the TTL check of every registered stand-in each third
// of the TTL, with the same output each time: an unchanged check is not
// written to the catalog, as vigil's renewals are not.
func (f *standInFleet) heartbeat() {
	defer f.done.Done()
	t := time.NewTicker(standInTTL / 3)
	defer t.Stop()
	for {
		select {
		case <-f.stop:
			return
		case <-t.C:
		}
		f.mu.Lock()
		var ws []*standIn
		for w := range f.registered {
			ws = append(ws, w)
		}
		f.mu.Unlock()
		_ = f.each(ws, func(w *standIn) error {
			return f.agent.UpdateTTL(f.checkID(w), "stand-in", api.HealthPassing)
		})
	}
}

// standInServer serves the Worker API of every stand-in; the listener a
// request came in on names the worker.
type standInServer struct {
	workerv1.UnimplementedWorkerServer
	f *standInFleet
}

func (s standInServer) Generate(req *workerv1.GenerateRequest, stream grpc.ServerStreamingServer[workerv1.GenerateResponse]) error {
	p, ok := peer.FromContext(stream.Context())
	if !ok || p.LocalAddr == nil {
		return status.Error(codes.Internal, "stand-in: no local address")
	}
	w := s.f.byAddr[p.LocalAddr.String()]
	if w == nil {
		return status.Errorf(codes.Internal, "stand-in: no worker on %s", p.LocalAddr)
	}
	if req.GetModel() != "" && req.GetModel() != w.model {
		return status.Errorf(codes.NotFound, "stand-in %s serves %q, not %q", w.id, w.model, req.GetModel())
	}
	w.requests.Add(1)
	w.lastRecv.Store(time.Now().UnixNano())
	if w.ttft > 0 {
		t := time.NewTimer(w.ttft)
		select {
		case <-t.C:
		case <-stream.Context().Done():
			t.Stop()
			return stream.Context().Err()
		}
	}
	if err := stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Chunk{
		Chunk: &workerv1.Chunk{TokenIds: []uint32{7}}}}); err != nil {
		return err
	}
	return stream.Send(&workerv1.GenerateResponse{Kind: &workerv1.GenerateResponse_Final{
		Final: &workerv1.Final{FinishReason: workerv1.FinishReason_FINISH_REASON_LENGTH, RequestId: req.GetRequestId(),
			Usage: &workerv1.Usage{}}}})
}

// modelRequests sends one-token requests to the router, taking the models
// in turn.
func modelRequests(cc grpc.ClientConnInterface, models []string) load.Request {
	c := workerv1.NewWorkerClient(cc)
	var n atomic.Uint64
	return func(ctx context.Context, id string) load.Outcome {
		stream, err := c.Generate(ctx, &workerv1.GenerateRequest{
			RequestId: id, Model: models[n.Add(1)%uint64(len(models))],
			Prompt:   &workerv1.GenerateRequest_TokenIds{TokenIds: &workerv1.TokenIds{Ids: []uint32{1, 2, 3}}},
			Stopping: &workerv1.Stopping{MaxTokens: 1},
		})
		if err != nil {
			return load.Outcome{Err: err}
		}
		var out load.Outcome
		for {
			msg, err := stream.Recv()
			if k := len(msg.GetChunk().GetTokenIds()); k > 0 {
				if out.First.IsZero() {
					out.First = time.Now()
				}
				out.Tokens += k
			}
			if errors.Is(err, io.EOF) {
				return out
			}
			if err != nil {
				out.Err = err
				return out
			}
		}
	}
}

// observeChurnCmd is the hidden first argument that runs the driver as
// B8's Consul observer process (see observeChurnMain).
const observeChurnCmd = "observe-churn"

// observeChurnMain watches the passing list of a service with blocking
// queries for up to -for, printing "armed" once its first answer is in and
// "gone <worker id> <unix nanoseconds>" for each worker missing from an
// answer that the previous one listed, timed when that answer returned:
// when the deregistration was seen in Consul. A process of its own, as
// B7's observer, so that the busy driver does not delay it.
func observeChurnMain(args []string) int {
	fs := flag.NewFlagSet(observeChurnCmd, flag.ContinueOnError)
	addr := fs.String("consul", "", "Consul HTTP address")
	service := fs.String("service", "", "service name")
	bound := fs.Duration("for", 5*time.Minute, "how long to watch")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	// Uncompressed, as the router asks: the observer sees the set no
	// later than Consul can give it.
	conf := api.DefaultConfig()
	conf.Address = *addr
	conf.Transport.DisableCompression = true
	client, err := api.NewClient(conf)
	if err != nil {
		fmt.Fprintln(os.Stderr, "observer:", err)
		return 1
	}
	ctx, cancel := context.WithTimeout(context.Background(), *bound)
	defer cancel()
	out := bufio.NewWriter(os.Stdout)
	var index uint64
	var prev map[string]bool
	for {
		entries, meta, err := client.Health().Service(*service, "", true,
			(&api.QueryOptions{WaitIndex: index, WaitTime: time.Minute}).WithContext(ctx))
		at := time.Now()
		if ctx.Err() != nil {
			return 0
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "observer:", err)
			return 1
		}
		index = meta.LastIndex
		cur := make(map[string]bool, len(entries))
		for _, e := range entries {
			cur[e.Service.Meta["worker_id"]] = true
		}
		if prev == nil {
			fmt.Fprintln(out, "armed")
		}
		for id := range prev {
			if !cur[id] {
				fmt.Fprintln(out, "gone", id, at.UnixNano())
			}
		}
		out.Flush()
		prev = cur
	}
}

// goneTimes reads the observer's output: the times each worker id left
// the passing list, in order.
func goneTimes(output string) (map[string][]time.Time, int) {
	out := map[string][]time.Time{}
	n := 0
	for _, line := range strings.Split(output, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || f[0] != "gone" {
			continue
		}
		ns, err := strconv.ParseInt(f[2], 10, 64)
		if err != nil {
			continue
		}
		out[f[1]] = append(out[f[1]], time.Unix(0, ns))
		n++
	}
	return out, n
}
