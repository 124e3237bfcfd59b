package command

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestNewBackendConsulConfigError(t *testing.T) {
	t.Setenv("CONSUL_CACERT", filepath.Join(t.TempDir(), "absent.pem"))
	_, err := newBackend(discoveryConfig{discovery: "consul", service: "llm"})
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != ExitConfig || !strings.HasPrefix(ee.msg, "--discovery consul: ") {
		t.Errorf("newBackend = %v, want a usage error naming --discovery consul", err)
	}
}

// run and route take both halves of one backend from newBackend.
func TestNewBackend(t *testing.T) {
	t.Parallel()
	testCases := map[string]struct {
		d                            discoveryConfig
		wantRegistry, wantDiscoverer string // %T
	}{
		"file":   {discoveryConfig{discovery: "file", registryDir: t.TempDir(), service: "llm"}, "*file.Registry", "*file.Discoverer"},
		"consul": {discoveryConfig{discovery: "consul", service: "llm"}, "*consul.Registry", "*consul.Discoverer"},
	}
	for name, tc := range testCases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b, err := newBackend(tc.d)
			if err != nil {
				t.Fatal(err)
			}
			reg, disc := b.registry(7*time.Second, time.Minute), b.discoverer(nil)
			if got := fmt.Sprintf("%T", reg); got != tc.wantRegistry {
				t.Errorf("registry is %s, want %s", got, tc.wantRegistry)
			}
			if got := fmt.Sprintf("%T", disc); got != tc.wantDiscoverer {
				t.Errorf("discoverer is %s, want %s", got, tc.wantDiscoverer)
			}
			// The announcer renews on the TTL the registry publishes.
			if got := reg.TTL(); got != 7*time.Second {
				t.Errorf("registry TTL = %s, want the --check-ttl given, 7s", got)
			}
		})
	}
}
