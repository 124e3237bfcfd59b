package enginemock

import (
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// Loopback serves e on addr, a fresh loopback port when addr is empty,
// until t ends, then stops e and checks that Serve returned nil. It returns
// the address served, for an adapter's tests.
func Loopback(t testing.TB, e *Engine, addr string) string {
	t.Helper()
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- e.Serve(lis) }()
	t.Cleanup(func() {
		e.Stop()
		if err := <-served; err != nil {
			t.Errorf("mock Serve() = %v, want nil", err)
		}
	})
	return lis.Addr().String()
}

// Post sends one POST to e's control surface in process and fails t
// unless it answers 200.
func Post(t testing.TB, e *Engine, path, body string) {
	t.Helper()
	rec := httptest.NewRecorder()
	e.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, strings.NewReader(body)))
	if rec.Code != http.StatusOK {
		t.Fatalf("POST %s %s: %d %s, want 200", path, body, rec.Code, rec.Body)
	}
}
