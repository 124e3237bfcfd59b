package discovery

import (
	"context"
	"slices"
	"strings"
)

// Discoverer is the reading half of a backend: it follows the passing
// workers of one service.
//
// Initial state: the caller knows no set until the first call of update,
// which Run makes as soon as it has read one (possibly empty). After that
// Run calls update with the whole new set each time the set changes, and
// only then. Sets hold usable registrations only (a host and a port from 1
// to 65535), sorted by Sort.
//
// Calls come from Run's goroutine, one at a time, and update must not keep
// the slice. Discovery failures are logged and retried, never returned;
// while they last, the last set stands.
//
// Run returns when ctx ends, and calls update no more once it has returned.
// It releases what it opened itself (tickers, queries in flight) before
// returning; what it was given (a Consul client) stays its giver's to close.
// A Discoverer is run once.
type Discoverer interface {
	// Run follows the service until ctx ends, calling update as above.
	Run(ctx context.Context, update func([]Registration))
	// String names the Discoverer for logs.
	String() string
}

// OnChange returns the function a Discoverer hands every set it reads, to
// keep the contract's promises about sets: it takes the slice, leaves out
// the registrations without a usable address, sorts the rest, and passes
// them on to update only when they differ from the last set passed (the
// first set always passes).
func OnChange(update func([]Registration)) func([]Registration) {
	var (
		last []Registration
		sent bool
	)
	return func(rs []Registration) {
		rs = slices.DeleteFunc(rs, func(r Registration) bool {
			return r.Address == "" || r.Port <= 0 || r.Port > 65535
		})
		Sort(rs)
		if sent && slices.Equal(rs, last) {
			return
		}
		last, sent = rs, true
		update(rs)
	}
}

// Sort orders registrations by worker id, then address, so that equal sets
// compare equal and a router's round-robin order is stable.
func Sort(rs []Registration) {
	slices.SortFunc(rs, func(a, b Registration) int {
		if c := strings.Compare(a.WorkerID, b.WorkerID); c != 0 {
			return c
		}
		return strings.Compare(a.Addr(), b.Addr())
	})
}
