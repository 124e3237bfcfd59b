package router

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// requireKey passes on the requests that carry key as a Bearer token
// (Authorization: Bearer KEY) and /health's, and answers the rest 401 with
// OpenAI's error body: type invalid_request_error, code invalid_api_key
// for a wrong key and null for a missing one, as api.openai.com does.
// (vLLM answers {"error":"Unauthorized"}, which OpenAI's clients cannot
// parse as an error; the router keeps one error shape.) /health stays
// open for load balancers' and orchestrators' probes, which carry no
// key, and tells nothing but whether a worker is known.
//
// The comparison is of SHA-256 digests in constant time, so its time tells
// neither the key's bytes nor its length. refused is called for each
// request refused.
func requireKey(key string, refused func(), next http.Handler) http.Handler {
	want := sha256.Sum256([]byte(key))
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			next.ServeHTTP(w, r)
			return
		}
		auth := r.Header.Get("Authorization")
		scheme, token, _ := strings.Cut(auth, " ")
		var e *apiError
		switch {
		case auth == "" || !strings.EqualFold(scheme, "Bearer"):
			e = &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error",
				msg: "You didn't provide an API key. Provide it in an Authorization header using Bearer auth (Authorization: Bearer YOUR_KEY)."}
		default:
			got := sha256.Sum256([]byte(strings.TrimSpace(token)))
			if subtle.ConstantTimeCompare(got[:], want[:]) == 1 {
				next.ServeHTTP(w, r)
				return
			}
			e = &apiError{status: http.StatusUnauthorized, typ: "invalid_request_error", code: "invalid_api_key",
				msg: "Incorrect API key provided."}
		}
		refused()
		w.Header().Set("WWW-Authenticate", `Bearer realm="vigil"`)
		writeError(w, e)
	})
}
