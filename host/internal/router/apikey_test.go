package router

import (
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func withAPIKey(key string) routerOption {
	return func(_ *ProxyConfig, h *HTTPConfig) { h.APIKey = key }
}

// With an API key, a request without it or with another gets 401 in
// OpenAI's error shape; with it, the request is served; /health needs none.
func TestAPIKey(t *testing.T) {
	t.Parallel()
	r := startRouter(t, []*fakeWorker{startWorker(t, "a", "m")}, withAPIKey("s3cret"))
	missing := map[string]any{"error": map[string]any{"message": "You didn't provide an API key. Provide it in an Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY).",
		"type": "invalid_request_error", "param": nil, "code": nil}}
	wrong := map[string]any{"error": map[string]any{"message": "Incorrect API key provided.",
		"type": "invalid_request_error", "param": nil, "code": "invalid_api_key"}}
	const completion = `{"model":"m","prompt":"hi","max_tokens":2}`
	for _, tc := range []struct {
		name, method, path, auth string
		want                     int
		body                     map[string]any
	}{
		{"no header", "POST", "/v1/completions", "", http.StatusUnauthorized, missing},
		{"other scheme", "POST", "/v1/completions", "Basic czNjcmV0", http.StatusUnauthorized, missing},
		{"wrong key", "POST", "/v1/completions", "Bearer s3cre", http.StatusUnauthorized, wrong},
		{"longer key", "POST", "/v1/completions", "Bearer s3cret!", http.StatusUnauthorized, wrong},
		{"models without key", "GET", "/v1/models", "", http.StatusUnauthorized, missing},
		{"unknown path without key", "GET", "/nope", "", http.StatusUnauthorized, missing},
		{"right key", "POST", "/v1/completions", "Bearer s3cret", http.StatusOK, nil},
		{"scheme in lower case", "GET", "/v1/models", "bearer s3cret", http.StatusOK, nil},
		{"health without key", "GET", "/health", "", http.StatusOK, nil},
	} {
		code, hdr, body := r.doAuth(t, tc.method, tc.path, completion, tc.auth)
		if code != tc.want {
			t.Errorf("%s: got %d, want %d:\n%s", tc.name, code, tc.want, body)
			continue
		}
		if tc.body == nil {
			continue
		}
		if diff := cmp.Diff(tc.body, decode(t, body)); diff != "" {
			t.Errorf("%s: body (-want +got):\n%s", tc.name, diff)
		}
		if got := hdr.Get("WWW-Authenticate"); got != `Bearer realm="vigil"` {
			t.Errorf("%s: WWW-Authenticate %q, want the Bearer scheme", tc.name, got)
		}
	}
}
