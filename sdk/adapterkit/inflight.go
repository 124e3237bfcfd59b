package adapterkit

import (
	"context"
	"sync"
)

// InFlight is the set of an adapter's generations in flight, which Relay
// keeps when its Generation names it. Adapter.Shutdown aborts every one
// still in flight before it closes the engine connection: the host may
// shut the adapter down as the requests it cut are still being aborted,
// and an engine request whose abort never reaches the engine goes on
// generating for nobody. Each generation is aborted at most once, whoever
// asks first; a later caller waits for that abort. The zero value is an
// empty set.
type InFlight struct {
	mu  sync.Mutex
	set map[*flight]struct{}
}

// flight is one generation in flight.
type flight struct {
	id    string
	abort func(ctx context.Context, id string) error
	once  sync.Once
	done  chan struct{} // closed when the abort has returned
}

// add records a generation in flight and returns it, for remove.
func (f *InFlight) add(id string, abort func(context.Context, string) error) *flight {
	fl := &flight{id: id, abort: abort, done: make(chan struct{})}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.set == nil {
		f.set = map[*flight]struct{}{}
	}
	f.set[fl] = struct{}{}
	return fl
}

// remove forgets a generation that has ended.
func (f *InFlight) remove(fl *flight) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.set, fl)
}

// Len is the number of generations in flight.
func (f *InFlight) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.set)
}

// AbortAll aborts every generation in flight, at once and each at most
// once, and returns when the engine has answered every abort or ctx has
// ended. Abort errors are ignored: the engine may be gone.
func (f *InFlight) AbortAll(ctx context.Context) {
	f.mu.Lock()
	flights := make([]*flight, 0, len(f.set))
	for fl := range f.set {
		flights = append(flights, fl)
	}
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, fl := range flights {
		wg.Go(func() { fl.stop(ctx) })
	}
	wg.Wait()
}

// stop aborts the engine request unless another caller already has, and
// waits for that abort to return or ctx to end. The abort runs with the
// first caller's ctx, which bounds it.
func (fl *flight) stop(ctx context.Context) {
	fl.once.Do(func() {
		go func() {
			defer close(fl.done)
			_ = fl.abort(ctx, fl.id)
		}()
	})
	select {
	case <-fl.done:
	case <-ctx.Done():
	}
}
