package adapterkit

import "strings"

// msgHTTP1 is logged once when the engine address answers HTTP/1.x: gRPC
// then reports only "http2: frame too large", as the response's first
// bytes ("HTTP/1.1 400") read as an HTTP/2 frame header of a length far
// over the limit.
const msgHTTP1 = "the engine address answers HTTP/1.1, not gRPC: is --engine-addr the engine's HTTP port?"

// answersHTTP1 reports whether err, a failed call's, says that the server
// sent an HTTP/1.x response where gRPC's HTTP/2 server preface was due:
// x/net/http2 notes it ("looked like an HTTP/1.1 header"); older versions
// say "frame too large" while reading the preface.
func answersHTTP1(err error) bool {
	if err == nil {
		return false
	}
	msg := err.Error()
	return strings.Contains(msg, "looked like an HTTP/1.1 header") ||
		strings.Contains(msg, "server preface: http2: frame too large")
}
