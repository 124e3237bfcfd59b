package router

import (
	"testing"

	"github.com/vigilhq/vigil/host/internal/workerapi"
)

// A worker ends a connection pinged more often than it permits (GOAWAY
// too_many_pings), failing every stream on it: the router pings no more
// often than that.
func TestWorkerKeepaliveWithinWorkersPolicy(t *testing.T) {
	t.Parallel()
	if workerKeepalive.Time < workerapi.KeepaliveMinTime {
		t.Errorf("router pings workers every %v, more often than they permit (%v)", workerKeepalive.Time, workerapi.KeepaliveMinTime)
	}
}
