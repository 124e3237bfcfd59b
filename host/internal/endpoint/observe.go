package endpoint

// Outcome is how a request to the worker endpoint ended, for metrics.
type Outcome int

// The outcomes of a request. A request gRPC refuses before the handler
// (one over workerapi.MaxRequestBytes) has none: it never reaches the endpoint.
const (
	// OutcomeOK: the engine finished it (stop, length or its own cancel).
	OutcomeOK Outcome = iota
	// OutcomeRefused: not admitted, the worker not admitting (starting,
	// not ready, draining): UNAVAILABLE.
	OutcomeRefused
	// OutcomeOverloaded: not admitted, --max-inflight requests in flight
	// already: RESOURCE_EXHAUSTED.
	OutcomeOverloaded
	// OutcomeInvalid: the request was invalid (INVALID_ARGUMENT, or
	// NOT_FOUND for another model), found here or by the engine.
	OutcomeInvalid
	// OutcomeCancelled: the client cancelled it or its deadline passed.
	OutcomeCancelled
	// OutcomeCut: the drain's grace period ended it.
	OutcomeCut
	// OutcomeFailed: the engine failed it, before or after its first
	// token.
	OutcomeFailed

	// NumOutcomes is the number of outcomes, for arrays indexed by them.
	NumOutcomes = int(OutcomeFailed) + 1
)

// String is the outcome's metric label value.
func (o Outcome) String() string {
	switch o {
	case OutcomeOK:
		return "ok"
	case OutcomeRefused:
		return "refused"
	case OutcomeOverloaded:
		return "overloaded"
	case OutcomeInvalid:
		return "invalid"
	case OutcomeCancelled:
		return "cancelled"
	case OutcomeCut:
		return "cut"
	case OutcomeFailed:
		return "failed"
	default:
		return "unknown"
	}
}

// Observer is told of the end of every request the endpoint's handler
// saw, admitted or not. Finished is called on the request's goroutine
// once its answer is decided; it must not block.
type Observer interface {
	// Finished reports one request's outcome and its tokens: the
	// prompt's (as the engine counted them; for a request that did not
	// finish, the token ids sent, 0 for a text prompt) and the completion
	// tokens generated (sent to the client, for one that did not finish).
	Finished(o Outcome, promptTokens, completionTokens uint32)
}
