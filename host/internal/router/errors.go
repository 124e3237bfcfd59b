package router

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/vigilhq/vigil/host/internal/workerapi"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// fromStatus maps a gRPC status (a worker's, or the pool's) to an OpenAI
// error, in the request's own field names: the worker API's field paths
// (stopping.max_tokens, prompt.token_ids) become OpenAI's (max_tokens,
// prompt or messages), a context-length error gets OpenAI's words with its
// numbers, and gRPC's transport text never reaches the client.
func fromStatus(err error, names fieldNames) *apiError {
	if ue, ok := errors.AsType[*UnmetError](err); ok {
		param := names.param(ue.Need.Name)
		return badRequest(param, "%s: no %s takes it (none lists the capability %s)%s", param, describe(ue.Model), ue.what(), capHints[ue.Need.Name])
	}
	if tl, ok := errors.AsType[*TooLargeError](err); ok {
		return &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", msg: tl.Error(), param: names.prompt}
	}
	st := status.Convert(err)
	e := &apiError{msg: st.Message()}
	switch st.Code() {
	case codes.InvalidArgument:
		e.status, e.typ = http.StatusBadRequest, "invalid_request_error"
		if ce := contextLengthError(st, names); ce != nil {
			return ce
		}
		e.param, e.msg = openAIField(strings.TrimPrefix(e.msg, "invalid argument: "), names)
		return e
	case codes.NotFound:
		e.status, e.typ, e.param = http.StatusNotFound, "invalid_request_error", "model"
		e.code = "model_not_found"
	case codes.ResourceExhausted:
		e.status, e.typ, e.retryAfter = http.StatusTooManyRequests, "rate_limit_error", RetryAfterBusy
	case codes.Unavailable:
		e.status, e.typ, e.retryAfter = http.StatusServiceUnavailable, "server_error", RetryAfter
	case codes.DeadlineExceeded:
		e.status, e.typ = http.StatusGatewayTimeout, "server_error"
		e.msg = "the request did not finish within the router's --request-timeout"
	case codes.Canceled:
		// Only a client that went away cancels; fail logs it, sends nothing.
		e.status, e.typ = 499, "server_error"
	default:
		e.status, e.typ = http.StatusInternalServerError, "server_error"
	}
	if c := clean(e.msg); c != e.msg {
		e.cause, e.msg = e.msg, c
	}
	return e
}

// contextLengthError is OpenAI's error for a request that does not fit the
// model, from the worker's ErrorInfo (workerapi.ReasonContextLength); nil
// for other statuses.
func contextLengthError(st *status.Status, names fieldNames) *apiError {
	for _, d := range st.Details() {
		info, ok := d.(*errdetails.ErrorInfo)
		if !ok || info.GetReason() != workerapi.ReasonContextLength || info.GetDomain() != workerapi.ErrorDomain {
			continue
		}
		num := func(key string) uint64 {
			n, _ := strconv.ParseUint(info.GetMetadata()[key], 10, 32)
			return n
		}
		maxLen, prompt, maxTokens := num(workerapi.MetaMaxModelLen), num(workerapi.MetaPromptTokens), num(workerapi.MetaMaxTokens)
		e := &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", code: "context_length_exceeded", param: names.maxTokens}
		switch {
		case prompt >= maxLen && maxTokens == 0:
			e.param = names.prompt
			e.msg = fmt.Sprintf("This model's maximum context length is %d tokens; the request asks for at least %d tokens (%d in the %s, at least 1 for the completion).",
				maxLen, prompt+1, prompt, names.prompt)
		default:
			if prompt >= maxLen {
				e.param = names.prompt
			}
			e.msg = fmt.Sprintf("This model's maximum context length is %d tokens; the request asks for %d tokens (%d in the %s, %d for the completion).",
				maxLen, prompt+maxTokens, prompt, names.prompt, maxTokens)
		}
		return e
	}
	return nil
}

// workerFields maps the worker API's field paths, which a worker's (or the
// pool's, or an adapter's) INVALID_ARGUMENT names first, to the request
// fields of OpenAI's API; "" stands for the request's prompt field and "-"
// for its max tokens field.
var workerFields = map[string]string{
	"model":                   "model",
	"prompt":                  "",
	"prompt.text":             "",
	"prompt.token_ids":        "",
	"prompt.messages":         "",
	"messages":                "",
	"max_tokens":              "-",
	"stopping.max_tokens":     "-",
	"temperature":             "temperature",
	"sampling.temperature":    "temperature",
	"top_p":                   "top_p",
	"sampling.top_p":          "top_p",
	"top_k":                   "top_k",
	"sampling.top_k":          "top_k",
	"seed":                    "seed",
	"sampling.seed":           "seed",
	"stop":                    "stop",
	"stopping.stop":           "stop",
	"stop_token_ids":          "stop_token_ids",
	"stopping.stop_token_ids": "stop_token_ids",
	"ignore_eos":              "ignore_eos",
	"stopping.ignore_eos":     "ignore_eos",
	"n":                       "n",
	"min_tokens":              "min_tokens",
	"stopping.min_tokens":     "min_tokens",
	"min_p":                   "min_p",
	"sampling.min_p":          "min_p",
	"logprobs.prompt":         "logprobs", // completions' echo with logprobs
	"logprobs.prompt_top":     "logprobs",
	// Tool calling (issue 27): the worker refuses a tool_choice its
	// engine cannot constrain, or tools its template cannot render.
	"tools":                               "tools",
	"prompt.messages.tools":               "tools",
	"tool_choice":                         "tool_choice",
	"prompt.messages.tool_choice":         "tool_choice",
	"parallel_tool_calls":                 "parallel_tool_calls",
	"prompt.messages.parallel_tool_calls": "parallel_tool_calls",
}

// protoPaths rewrites the worker API's paths that a message mentions
// after its field (as in "send prompt.token_ids").
var protoPaths = strings.NewReplacer("prompt.token_ids", "token ids", "prompt.text", "text", "prompt.messages", "messages")

// openAIField reads the field a worker's message names first ("field:
// ...", "prompt.messages[2].role: ...") and returns its OpenAI name and
// the message with the name in its place; "" and the message as it is
// when it names none.
func openAIField(msg string, names fieldNames) (param, out string) {
	field, rest, ok := strings.Cut(msg, ":")
	if !ok || strings.ContainsAny(field, " ") {
		return "", clean(msg)
	}
	base, index, _ := strings.Cut(field, "[")
	if index != "" {
		index = "[" + index
	}
	name, known := workerFields[base]
	if !known {
		return "", clean(msg)
	}
	switch name {
	case "":
		name = names.prompt
	case "-":
		name = names.maxTokens
	}
	return name, clean(name + index + ":" + protoPaths.Replace(rest))
}

// transportText is what gRPC's and Go's transport errors say, the
// connection's and not the request's: a refused or failed dial, a TLS
// handshake, a reset, a GOAWAY, a keepalive timeout, an EOF. A message
// holding any reaches no client (TestTransportFailuresReachNoAnswer).
var transportText = []string{
	"rpc error:", "desc =", "transport:", "transport is closing", "connection error", "connection closed",
	"connection refused", "connection reset", "reset by peer", "broken pipe", "i/o timeout", "dial tcp",
	"keepalive", "EOF", "GOAWAY", "goaway", "RST_STREAM", "http2:", "server preface", "tls:", "x509:",
	"handshake", "grpc:", "draining", "without sending trailers", "no such host",
}

// unreachable replaces a message that holds transport text.
const unreachable = "the worker or its engine could not be reached; retry later"

// clean keeps gRPC's transport text (see transportText) from reaching a
// client: such a message becomes a plain one; the router's log keeps the
// original.
func clean(msg string) string {
	for _, s := range transportText {
		if strings.Contains(msg, s) {
			return unreachable
		}
	}
	return msg
}

// cleanStatus is err as the router's gRPC clients get it: the worker's (or
// the pool's) status with its code and details, its message cleaned of
// transport text; cause is the original message when it was replaced.
func cleanStatus(err error) (cause string, out error) {
	st, ok := status.FromError(err)
	if !ok || st.Code() == codes.OK {
		return "", err
	}
	msg := clean(st.Message())
	if msg == st.Message() {
		return "", err
	}
	pb := st.Proto()
	pb.Message = msg
	return st.Message(), status.FromProto(pb).Err()
}
