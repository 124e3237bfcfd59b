package sdk

import (
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	pluginv1 "github.com/vigilhq/vigil/sdk/internal/pluginv1"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func TestCapabilitiesRoundTrip(t *testing.T) {
	t.Parallel()
	tests := map[string]Capabilities{
		"zero":      {},
		"readiness": {Readiness: true},
		"all":       {Readiness: true, Generate: true, Abort: true},
	}
	for name, c := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(c, capabilitiesFromProto(capabilitiesToProto(c))); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff(Capabilities{}, capabilitiesFromProto(nil)); diff != "" {
		t.Errorf("capabilitiesFromProto(nil) mismatch (-want +got):\n%s", diff)
	}
}

func TestStartRequestRoundTrip(t *testing.T) {
	t.Parallel()
	tests := map[string]StartRequest{
		"zero": {},
		"full": {
			EngineAddr:      "127.0.0.1:50051",
			StartupDeadline: 30 * time.Minute,
			Health: HealthPolicy{
				Interval:    500 * time.Millisecond,
				Timeout:     time.Second,
				Failures:    2,
				RetryMax:    250 * time.Millisecond,
				BusyTimeout: 30 * time.Second,
				Confirm:     time.Second,
			},
			Options: map[string]string{"a": "1", "b": ""},
		},
		"busy detection off": {Health: HealthPolicy{BusyTimeout: -1}},
		"sub-millisecond durations": {
			EngineAddr:      "[::1]:1",
			StartupDeadline: 1500 * time.Microsecond,
			Health:          HealthPolicy{Interval: time.Nanosecond},
		},
	}
	for name, r := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(r, startRequestFromProto(startRequestToProto(r))); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff(StartRequest{}, startRequestFromProto(nil)); diff != "" {
		t.Errorf("startRequestFromProto(nil) mismatch (-want +got):\n%s", diff)
	}
}

func TestWorkerRoundTrip(t *testing.T) {
	t.Parallel()
	tests := map[string]Worker{
		"zero": {},
		"full": {
			ModelID:           "/models/llama",
			ServedModelName:   "llama",
			EngineVersion:     "0.33.0",
			InstanceID:        "0123456789abcdef",
			MaxModelLen:       4096,
			KVBlockSize:       16,
			SupportsTextInput: true,
			Accepts:           "json_schema,n=64",
			ReasoningParser:   "qwen3",
			ToolCallParser:    "hermes",
		},
	}
	for name, w := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(w, workerFromProto(workerToProto(w))); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
	if diff := cmp.Diff(Worker{}, workerFromProto(nil)); diff != "" {
		t.Errorf("workerFromProto(nil) mismatch (-want +got):\n%s", diff)
	}
}

func TestEventRoundTrip(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 6, 1, 12, 30, 0, 123456789, time.UTC)
	tests := map[string]Event{
		"serving":   {Availability: Serving, Reason: "vLLM engine serving", Time: at},
		"not ready": {Availability: NotReady, Reason: "paused", Time: at},
		"lost":      {Availability: Lost, Reason: "vLLM engine lost: health status NOT_SERVING", Time: at},
		"draining":  {Availability: Draining, Reason: "vLLM engine draining", Time: at},
		"no reason": {Availability: Serving, Time: at},
		"zero time": {Availability: Lost},
		"busy":      {Availability: Serving, Reason: "vLLM engine busy", Time: at, Busy: true},
	}
	for name, e := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			// cmp compares times with Time.Equal, so the zone may differ.
			if diff := cmp.Diff(e, eventFromProto(eventToProto(e))); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestEventFromProtoUnknown: a state the host does not know cannot be
// trusted to serve, so it arrives as Lost, keeping the reason.
func TestEventFromProtoUnknown(t *testing.T) {
	t.Parallel()
	at := time.Date(2025, 6, 1, 12, 30, 0, 0, time.UTC)
	tests := map[string]pluginv1.Availability{
		"unspecified":     pluginv1.Availability_AVAILABILITY_UNSPECIFIED,
		"from the future": pluginv1.Availability(5),
		"large":           pluginv1.Availability(1 << 20),
		"negative":        pluginv1.Availability(-1),
	}
	for name, a := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got := eventFromProto(&pluginv1.AvailabilityEvent{Availability: a, Reason: "why", Time: timestamppb.New(at)})
			want := Event{Availability: Lost, Reason: "why", Time: at}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("eventFromProto(%v) mismatch (-want +got):\n%s", a, diff)
			}
		})
	}
	if got := eventFromProto(nil); got.Availability != Lost {
		t.Errorf("eventFromProto(nil).Availability = %v, want %v", got.Availability, Lost)
	}
}

// TestAvailabilityNumbers: the Go constants match the wire enum.
func TestAvailabilityNumbers(t *testing.T) {
	t.Parallel()
	want := map[Availability]pluginv1.Availability{
		AvailabilityUnknown: pluginv1.Availability_AVAILABILITY_UNSPECIFIED,
		Serving:             pluginv1.Availability_AVAILABILITY_SERVING,
		NotReady:            pluginv1.Availability_AVAILABILITY_NOT_READY,
		Lost:                pluginv1.Availability_AVAILABILITY_LOST,
		Draining:            pluginv1.Availability_AVAILABILITY_DRAINING,
	}
	for a, w := range want {
		if int32(a) != int32(w) {
			t.Errorf("%v = %d, want %d as %v", a, int32(a), int32(w), w)
		}
	}
}

func TestAvailabilityString(t *testing.T) {
	t.Parallel()
	tests := map[Availability]string{
		AvailabilityUnknown: "UNKNOWN",
		Serving:             "SERVING",
		NotReady:            "NOT_READY",
		Lost:                "LOST",
		Draining:            "DRAINING",
		Availability(42):    "UNKNOWN",
		Availability(-1):    "UNKNOWN",
	}
	for a, want := range tests {
		if got := a.String(); got != want {
			t.Errorf("Availability(%d).String() = %q, want %q", int(a), got, want)
		}
	}
}

func TestHealthPolicy(t *testing.T) {
	t.Parallel()
	defaults := HealthPolicy{Interval: DefaultHealthInterval, Timeout: DefaultHealthTimeout, Failures: DefaultHealthFailures, RetryMax: DefaultRetryMax, BusyTimeout: DefaultBusyTimeout}
	t.Run("WithDefaults", func(t *testing.T) {
		t.Parallel()
		tests := map[string]struct{ in, want HealthPolicy }{
			"zero takes every default": {in: HealthPolicy{}, want: defaults},
			"set fields are kept": {
				in:   HealthPolicy{Interval: time.Second, Failures: 5, Confirm: time.Second},
				want: HealthPolicy{Interval: time.Second, Timeout: DefaultHealthTimeout, Failures: 5, RetryMax: DefaultRetryMax, BusyTimeout: DefaultBusyTimeout, Confirm: time.Second},
			},
			// Negative is off, as net.Dialer.KeepAlive's.
			"busy detection off is kept": {
				in:   HealthPolicy{BusyTimeout: -1},
				want: HealthPolicy{Interval: DefaultHealthInterval, Timeout: DefaultHealthTimeout, Failures: DefaultHealthFailures, RetryMax: DefaultRetryMax, BusyTimeout: -1},
			},
		}
		for name, tt := range tests {
			if diff := cmp.Diff(tt.want, tt.in.WithDefaults()); diff != "" {
				t.Errorf("%s: WithDefaults() mismatch (-want +got):\n%s", name, diff)
			}
		}
	})
	t.Run("Validate", func(t *testing.T) {
		t.Parallel()
		tests := map[string]struct {
			in   HealthPolicy
			want *FieldError // nil for valid
		}{
			"zero":               {in: HealthPolicy{}},
			"defaults":           {in: defaults},
			"negative interval":  {in: HealthPolicy{Interval: -1}, want: &FieldError{FieldHealthInterval, "-1ns: must be a positive duration"}},
			"negative timeout":   {in: HealthPolicy{Timeout: -time.Second}, want: &FieldError{FieldHealthTimeout, "-1s: must be a positive duration"}},
			"negative failures":  {in: HealthPolicy{Failures: -1}, want: &FieldError{FieldHealthFailures, "-1: must be 1 or more"}},
			"negative retry max": {in: HealthPolicy{RetryMax: -time.Millisecond}, want: &FieldError{FieldHealthRetryMax, "-1ms: must be a positive duration"}},
			"negative confirm":   {in: HealthPolicy{Confirm: -time.Millisecond}, want: &FieldError{FieldHealthConfirm, "-1ms: must be a positive duration or 0"}},
			"busy detection off": {in: HealthPolicy{BusyTimeout: -1}},
		}
		for name, tt := range tests {
			err := tt.in.Validate()
			var got *FieldError
			if err != nil && !errors.As(err, &got) {
				t.Errorf("%s: Validate() = %v, want a *FieldError", name, err)
				continue
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("%s: Validate() mismatch (-want +got):\n%s", name, diff)
			}
			if err != nil && !errors.Is(err, ErrInvalidArgument) {
				t.Errorf("%s: Validate() = %v, want an error wrapping ErrInvalidArgument", name, err)
			}
		}
	})
}

// Every field an adapter author sees crosses the plugin boundary.
func TestGenerateRequestRoundTrip(t *testing.T) {
	t.Parallel()
	temp, topP, topK, seed := float32(0.5), float32(0.9), uint32(40), int64(7)
	tests := map[string]GenerateRequest{
		"text": {RequestID: "r1", Text: "hi"},
		"full": {
			RequestID: "r2", TokenIDs: []uint32{1, 2}, Temperature: &temp, TopP: &topP, TopK: &topK,
			Seed: &seed, MaxTokens: 9, StopTokenIDs: []uint32{3}, Stop: []string{"x"}, IgnoreEOS: true,
			MinTokens: 4, MinP: 0.05,
		},
		"penalties and bias": {
			RequestID: "r3", Text: "hi", PresencePenalty: 0.5, FrequencyPenalty: -1, RepetitionPenalty: &temp,
			LogitBias: map[uint32]float32{7: -100, 9: 2.5},
		},
		"json object":    {RequestID: "r4", Text: "hi", StructuredOutput: &StructuredOutput{Kind: StructuredJSONObject}},
		"json schema":    {RequestID: "r5", Text: "hi", StructuredOutput: &StructuredOutput{Kind: StructuredJSONSchema, Text: `{"type":"object"}`}},
		"regex":          {RequestID: "r6", Text: "hi", StructuredOutput: &StructuredOutput{Kind: StructuredRegex, Text: `a+`}},
		"choice":         {RequestID: "r7", Text: "hi", StructuredOutput: &StructuredOutput{Kind: StructuredChoice, Choices: []string{"yes", "no"}}},
		"grammar":        {RequestID: "r8", Text: "hi", StructuredOutput: &StructuredOutput{Kind: StructuredGrammar, Dialect: "lark", Text: `start: "a"`}},
		"structural tag": {RequestID: "r9", Text: "hi", StructuredOutput: &StructuredOutput{Kind: StructuredTag, Text: `{"type":"structural_tag"}`}},
	}
	for name, r := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(r, generateRequestFromProto(generateRequestToProto(r))); diff != "" {
				t.Errorf("round trip mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
