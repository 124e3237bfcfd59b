package load

import (
	"testing"
	"time"
)

// TestStampAge: a stamp, a send time's low 31 bits, gives the send time
// back, across the stamp's wrap-around too.
func TestStampAge(t *testing.T) {
	t.Parallel()
	for _, sent := range []int64{5<<31 + 100, 1<<31 - 100} {
		stamp := uint32(sent & stampMask)
		if got := stampAge(stamp, sent+3000); got != 3000 {
			t.Errorf("stampAge of a stamp sent at %d, read 3000ns later = %d, want 3000", sent, got)
		}
	}
	// A stamp taken now: stamped reads it against the clock now, so its
	// latency is the few microseconds between.
	now := uint32(time.Now().UnixNano() & stampMask)
	paths := stamped(nil, []uint32{now, 1, 2})
	if len(paths) != 1 || paths[0].Latency(EngineToClient) < 0 || paths[0].Latency(EngineToClient) > time.Second {
		t.Errorf("stamped() = %+v, want one path of under a second", paths)
	}
}
