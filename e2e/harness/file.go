package harness

import (
	"context"
	"fmt"
	"os"
	"time"
)

// FilePoll is how often the file registry observers look at a record's
// path. Without a file-watching dependency there is no event to await, so
// a 1ms poll stands in; it bounds the observer's own delay at about 1ms.
const FilePoll = time.Millisecond

// WaitFile polls path until it exists, up to timeout.
func WaitFile(path string, timeout time.Duration) (time.Time, error) {
	deadline := time.Now().Add(timeout)
	for {
		_, err := os.Stat(path)
		now := time.Now()
		if err == nil {
			return now, nil
		}
		if now.After(deadline) {
			return time.Time{}, fmt.Errorf("record %s did not appear within %s", path, timeout)
		}
		time.Sleep(FilePoll)
	}
}

// ObserveFileGone polls path every FilePoll from now on and records the
// first time it is found missing.
func ObserveFileGone(ctx context.Context, path string) *Observation {
	o := &Observation{done: make(chan struct{})}
	go func() {
		for {
			_, err := os.Stat(path)
			now := time.Now()
			if os.IsNotExist(err) {
				o.finish(now, nil)
				return
			}
			if ctx.Err() != nil {
				o.finish(time.Time{}, fmt.Errorf("record %s still present: %w", path, ctx.Err()))
				return
			}
			time.Sleep(FilePoll)
		}
	}()
	return o
}
