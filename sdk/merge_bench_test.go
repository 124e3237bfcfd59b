package sdk

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"
)

// BenchmarkIdlePathCPU measures the CPU (this process: both sides of the
// plugin connection) per chunk when the path is idle, every chunk
// produced only once the previous one reached the host's send, as a
// batching engine's step gives: the case where merging cannot help, so
// what it costs shows. 64 streams at once.
func BenchmarkIdlePathCPU(b *testing.B) {
	const streams = 64
	delivered := make([]chan struct{}, streams)
	for i := range delivered {
		delivered[i] = make(chan struct{}, 1)
	}
	e := TestPluginEngine(b, &stubGenerator{generate: func(ctx context.Context, req GenerateRequest, send func(Chunk) error) (Result, error) {
		d := delivered[req.TokenIDs[0]]
		for i := range int(req.MaxTokens) {
			if err := send(Chunk{TokenIDs: []uint32{uint32(i)}, Text: "x"}); err != nil {
				return Result{}, err
			}
			select {
			case <-d:
			case <-ctx.Done():
				return Result{}, ctx.Err()
			}
		}
		return Result{FinishReason: FinishLength}, nil
	}}).(Generator)
	perStream := b.N/streams + 1
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	start := time.Now()
	b.ResetTimer()
	var wg sync.WaitGroup
	for s := range streams {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.Generate(context.Background(), GenerateRequest{RequestID: "r", TokenIDs: []uint32{uint32(s)}, MaxTokens: uint32(perStream)}, func(Chunk) error {
				delivered[s] <- struct{}{}
				return nil
			})
			if err != nil {
				b.Error(err)
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
	tokens := float64(perStream * streams)
	b.ReportMetric(float64(cpu.Nanoseconds())/tokens, "cpu-ns/token")
	b.ReportMetric(tokens/time.Since(start).Seconds(), "tokens/s")
}
