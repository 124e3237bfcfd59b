package enginemock

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// collect runs one generation to its end.
func collect(ctx context.Context, e *Engine, req Request) ([]Chunk, error) {
	var got []Chunk
	err := e.Generate(ctx, req, func(c Chunk) error {
		got = append(got, c)
		return nil
	})
	return got, err
}

// started starts a generation of up to 10 tokens and returns its chunks as
// they come and its result.
func started(t *testing.T, ctx context.Context, e *Engine, id string) (<-chan Chunk, <-chan error) {
	t.Helper()
	chunks, done := make(chan Chunk, 16), make(chan error, 1)
	go func() {
		done <- e.Generate(ctx, Request{ID: id, MaxNewTokens: 10}, func(c Chunk) error {
			chunks <- c
			return nil
		})
		close(chunks)
	}()
	return chunks, done
}

// recv takes n chunks of a started generation.
func recv(t *testing.T, chunks <-chan Chunk, n int) []Chunk {
	t.Helper()
	var got []Chunk
	for range n {
		c, ok := <-chunks
		if !ok {
			t.Fatalf("generation ended after %d chunks, want %d", len(got), n)
		}
		got = append(got, c)
	}
	return got
}

// seq is the formula restated: (seed + sum(prompt)*31 + i*7919) % 32000 + 100
// for i from 0 to n-1.
func seq(seed uint32, prompt []uint32, n int) []uint32 {
	var s uint32
	for _, p := range prompt {
		s += p
	}
	out := make([]uint32, n)
	for i := range out {
		out[i] = (seed+s*31+uint32(i)*7919)%32000 + 100
	}
	return out
}

// chunks splits ids into chunks of per with fin on the last.
func chunks(ids []uint32, per int, fin Finish) []Chunk {
	var out []Chunk
	for i := 0; i < len(ids); i += per {
		out = append(out, Chunk{Tokens: ids[i:min(i+per, len(ids))]})
	}
	out[len(out)-1].Finish = &fin
	return out
}

func TestOutputToken(t *testing.T) {
	t.Parallel()
	tests := []struct {
		seed   int64
		prompt []uint32
		i      int
		want   uint32
	}{
		{0, nil, 0, 100},
		{42, []uint32{1, 2, 3}, 0, 328}, // 42 + 6*31 = 228
		{42, []uint32{1, 2, 3}, 2, 16166},
		{-1, nil, 0, (1<<32-1)%32000 + 100}, // uint32 arithmetic
	}
	for _, tt := range tests {
		if got := OutputToken(tt.seed, tt.prompt, tt.i); got != tt.want {
			t.Errorf("OutputToken(%d, %v, %d) = %d, want %d", tt.seed, tt.prompt, tt.i, got, tt.want)
		}
	}
	if got, want := TokenText(328), " t328"; got != want {
		t.Errorf("TokenText(328) = %q, want %q", got, want)
	}
}

func TestGenerate(t *testing.T) {
	t.Parallel()
	p := []uint32{5}
	stopAt := seq(0, p, 10)
	tests := map[string]struct {
		perMsg int
		req    Request
		want   []Chunk
	}{
		"seed": {
			req:  Request{Prompt: []uint32{1, 2, 3}, Seed: 42, MaxNewTokens: 3},
			want: chunks([]uint32{328, 8247, 16166}, 1, Finish{Reason: FinishLength, OutputTokens: 3}),
		},
		"three tokens per message": {
			perMsg: 3,
			req:    Request{Prompt: p, MaxNewTokens: 7},
			want:   chunks(seq(0, p, 7), 3, Finish{Reason: FinishLength, OutputTokens: 7}),
		},
		"max 0 means 1": {
			req:  Request{Prompt: p},
			want: chunks(seq(0, p, 1), 1, Finish{Reason: FinishLength, OutputTokens: 1}),
		},
		"stop token is the last": {
			perMsg: 2,
			req:    Request{Prompt: p, MaxNewTokens: 10, StopTokenIDs: []uint32{1, stopAt[4]}},
			want:   chunks(stopAt[:5], 2, Finish{Reason: FinishStop, StopToken: stopAt[4], OutputTokens: 5}),
		},
		"min new tokens defers a stop token": {
			req:  Request{Prompt: p, MaxNewTokens: 4, MinNewTokens: 3, StopTokenIDs: []uint32{stopAt[1]}},
			want: chunks(stopAt[:4], 1, Finish{Reason: FinishLength, OutputTokens: 4}),
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, Config{TokensPerMessage: tt.perMsg})
			for run := range 2 { // deterministic: the same answer twice
				got, err := collect(t.Context(), e, tt.req)
				if err != nil {
					t.Fatalf("run %d: %v", run, err)
				}
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("run %d: chunks (-want +got):\n%s", run, diff)
				}
			}
		})
	}
}

func TestGenerateRefuses(t *testing.T) {
	t.Parallel()
	bad := status.Error(codes.InvalidArgument, "n: one sequence only")
	tests := map[string]struct {
		cfg      Config
		enter    func(*Engine)
		req      Request
		wantCode codes.Code
	}{
		"bad request":         {req: Request{ID: "r", Err: bad}, wantCode: codes.InvalidArgument},
		"bad request, asleep": {enter: func(e *Engine) { e.SetSleeping(true) }, req: Request{ID: "r", Err: bad}, wantCode: codes.InvalidArgument},
		"asleep":              {enter: func(e *Engine) { e.SetSleeping(true) }, req: Request{ID: "r"}, wantCode: codes.Unavailable},
		"paused":              {enter: func(e *Engine) { e.SetPaused(true) }, req: Request{ID: "r"}, wantCode: codes.Unavailable},
		"stopped":             {enter: (*Engine).Stop, req: Request{ID: "r"}, wantCode: codes.Unavailable},
		"starting":            {cfg: Config{StartupDelay: time.Hour}, req: Request{ID: "r"}, wantCode: codes.Unavailable},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := newEngine(t, tt.cfg)
			if tt.enter != nil {
				tt.enter(e)
			}
			got, err := collect(t.Context(), e, tt.req)
			if status.Code(err) != tt.wantCode || len(got) != 0 {
				t.Errorf("Generate = %d chunks, %v; want none and code %v", len(got), err, tt.wantCode)
			}
			if n := e.State().Requests["r"]; n != 1 {
				t.Errorf("requests[r] = %d, want 1: refused requests count", n)
			}
		})
	}
}

// TestHoldAbort: a held generation sends what it has, waits, and ends with
// FinishAborted when aborted by id; the abort is counted.
func TestHoldAbort(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{TokensPerMessage: 2})
	must(t, e, "/hold", `{"at_token": 3}`)
	chunks, done := started(t, t.Context(), e, "r")
	ids := seq(0, nil, 3)
	want := []Chunk{{Tokens: ids[:2]}, {Tokens: ids[2:3]}}
	if diff := cmp.Diff(want, recv(t, chunks, 2)); diff != "" {
		t.Errorf("before the hold (-want +got):\n%s", diff)
	}
	if got := e.State().InFlight; got != 1 {
		t.Errorf("in_flight = %d, want 1", got)
	}
	e.Abort("r", "gone")
	want = []Chunk{{Finish: &Finish{Reason: FinishAborted, OutputTokens: 3}}}
	if diff := cmp.Diff(want, recv(t, chunks, 1)); diff != "" {
		t.Errorf("after Abort (-want +got):\n%s", diff)
	}
	if err := <-done; err != nil {
		t.Errorf("Generate = %v, want nil", err)
	}
	s := e.State()
	if diff := cmp.Diff(map[string]int{"r": 1, "gone": 1}, s.Aborts); diff != "" || s.InFlight != 0 {
		t.Errorf("aborts (-want +got):\n%s\nin_flight %d, want 0", diff, s.InFlight)
	}
}

// TestHoldRelease: /release lets every held generation finish.
func TestHoldRelease(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{})
	must(t, e, "/hold", `{"at_token": 3}`)
	c1, d1 := started(t, t.Context(), e, "a")
	recv(t, c1, 3)
	must(t, e, "/hold", `{"at_token": 1}`) // a second hold shares the release
	c2, d2 := started(t, t.Context(), e, "b")
	recv(t, c2, 1)
	must(t, e, "/release", "")
	must(t, e, "/release", "") // nothing held: no-op
	recv(t, c1, 7)
	recv(t, c2, 9)
	if err1, err2 := <-d1, <-d2; err1 != nil || err2 != nil {
		t.Errorf("Generate = %v, %v; want nil, nil", err1, err2)
	}
}

// TestAbortInFlight aborts every generation without counting aborts.
func TestAbortInFlight(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{})
	must(t, e, "/hold", `{"at_token": 1}`)
	chunks, done := started(t, t.Context(), e, "r")
	recv(t, chunks, 1)
	e.AbortInFlight()
	if got := recv(t, chunks, 1)[0].Finish; got == nil || got.Reason != FinishAborted {
		t.Errorf("last chunk's finish = %+v, want FinishAborted", got)
	}
	if err := <-done; err != nil || e.State().AbortsTotal != 0 {
		t.Errorf("Generate = %v, aborts_total %d; want nil, 0", err, e.State().AbortsTotal)
	}
}

func TestFail(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{})
	must(t, e, "/fail", `{"at_token": 2, "code": "RESOURCE_EXHAUSTED"}`)
	got, err := collect(t.Context(), e, Request{MaxNewTokens: 4})
	if status.Code(err) != codes.ResourceExhausted || len(got) != 2 {
		t.Errorf("first generation: %d chunks, %v; want 2 and RESOURCE_EXHAUSTED", len(got), err)
	}
	got, err = collect(t.Context(), e, Request{MaxNewTokens: 4}) // only the next one fails
	if err != nil || len(got) != 4 {
		t.Errorf("second generation: %d chunks, %v; want 4, nil", len(got), err)
	}
}

// With every, each new stream fails, until the next /fail.
func TestFailEvery(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{})
	must(t, e, "/fail", `{"at_token": 0, "code": "INTERNAL", "every": true}`)
	for i := range 3 {
		if got, err := collect(t.Context(), e, Request{MaxNewTokens: 4}); status.Code(err) != codes.Internal || len(got) != 0 {
			t.Errorf("generation %d: %d chunks, %v; want 0 and INTERNAL", i, len(got), err)
		}
	}
	must(t, e, "/fail", `{"at_token": 1, "code": "UNAVAILABLE"}`)
	collect(t.Context(), e, Request{MaxNewTokens: 4})
	if got, err := collect(t.Context(), e, Request{MaxNewTokens: 4}); err != nil || len(got) != 4 {
		t.Errorf("after a one-stream /fail: %d chunks, %v; want 4, nil", len(got), err)
	}
}

func TestClientLeaves(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{})
	must(t, e, "/hold", `{"at_token": 1}`)
	ctx, cancel := context.WithCancel(t.Context())
	chunks, done := started(t, ctx, e, "c")
	recv(t, chunks, 1)
	cancel()
	if err := <-done; status.Code(err) != codes.Canceled {
		t.Errorf("Generate after cancel = %v, want CANCELED", err)
	}
}

func TestSendError(t *testing.T) {
	t.Parallel()
	e := newEngine(t, Config{})
	gone := errors.New("gone")
	if err := e.Generate(t.Context(), Request{MaxNewTokens: 3}, func(Chunk) error { return gone }); !errors.Is(err, gone) {
		t.Errorf("Generate = %v, want send's error", err)
	}
	if got := e.State().InFlight; got != 0 {
		t.Errorf("in_flight = %d, want 0", got)
	}
}

func TestTokenDelay(t *testing.T) {
	t.Parallel()
	const delay = 20 * time.Millisecond
	e := newEngine(t, Config{TokenDelay: delay, TokensPerMessage: 2})
	begin := time.Now()
	got, err := collect(t.Context(), e, Request{MaxNewTokens: 6})
	if err != nil || len(got) != 3 {
		t.Fatalf("Generate = %d chunks, %v; want 3, nil", len(got), err)
	}
	if took := time.Since(begin); took < 2*delay {
		t.Errorf("3 messages took %v, want at least %v: none before the first", took, 2*delay)
	}
}

// TestStampTokens: stamping, every output token is its message's send
// time, taken back to a short age against the mask, and the generation
// still ends after MaxNewTokens; otherwise tokens follow OutputToken.
func TestStampTokens(t *testing.T) {
	t.Parallel()
	e := New(Config{TokensPerMessage: 2})
	e.stamp.Store(true)
	before := time.Now()
	got, err := collect(t.Context(), e, Request{ID: "r", Prompt: []uint32{1}, MaxNewTokens: 5})
	after := time.Now().UnixNano()
	if err != nil || len(got) != 3 || got[2].Finish == nil || got[2].Finish.OutputTokens != 5 {
		t.Fatalf("got %d chunks (%+v), err %v; want 3 ending after 5 tokens", len(got), got, err)
	}
	for i, c := range got {
		for _, tok := range c.Tokens {
			if tok != c.Tokens[0] {
				t.Errorf("chunk %d tokens %v: want one stamp for the whole message", i, c.Tokens)
			}
			if age := time.Duration((after - int64(tok)) & stampMask); age > time.Duration(after-before.UnixNano()) {
				t.Errorf("chunk %d token %d is %s old at the end, want a send time within the generation", i, tok, age)
			}
		}
	}
	plain, err := collect(t.Context(), New(Config{}), Request{ID: "p", Prompt: []uint32{1}, MaxNewTokens: 1})
	if err != nil || len(plain) != 1 || plain[0].Tokens[0] != OutputToken(0, []uint32{1}, 0) {
		t.Errorf("without stamping: %+v, %v; want OutputToken", plain, err)
	}
}

// A script replaces the output: its tokens in order, then the end (or
// max_new_tokens first); the last prompt is in the State.
func TestScript(t *testing.T) {
	t.Parallel()
	e := New(Config{})
	t.Cleanup(e.Stop)
	e.Script([]uint32{7, 8, 9})
	var got []uint32
	chunks, err := collect(t.Context(), e, Request{ID: "a", Prompt: []uint32{1, 2}, MaxNewTokens: 100})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range chunks {
		got = append(got, c.Tokens...)
	}
	if diff := cmp.Diff([]uint32{7, 8, 9}, got); diff != "" || chunks[len(chunks)-1].Finish.Reason != FinishLength {
		t.Errorf("scripted output (-want +got):\n%s; last %+v", diff, chunks[len(chunks)-1])
	}
	if diff := cmp.Diff([]uint32{1, 2}, e.State().LastPrompt); diff != "" {
		t.Errorf("State.LastPrompt (-want +got):\n%s", diff)
	}
	chunks, _ = collect(t.Context(), e, Request{ID: "b", MaxNewTokens: 2})
	if n := len(chunks); n != 2 {
		t.Errorf("max_new_tokens 2 with a script of 3: %d chunks, want 2", n)
	}
	e.ScriptEOS([]uint32{7, 8})
	chunks, _ = collect(t.Context(), e, Request{ID: "d", MaxNewTokens: 100})
	if last := chunks[len(chunks)-1].Finish; last == nil || last.Reason != FinishStop || last.OutputTokens != 2 {
		t.Errorf("ScriptEOS of 2: last %+v, want FinishStop after 2 tokens, as at the end of sequence", last)
	}
	e.Script(nil)
	chunks, _ = collect(t.Context(), e, Request{ID: "c", Prompt: []uint32{1, 2}, MaxNewTokens: 4})
	if diff := cmp.Diff(seq(0, []uint32{1, 2}, 1), chunks[0].Tokens); diff != "" {
		t.Errorf("after Script(nil), OutputToken's (-want +got):\n%s", diff)
	}
}

// output is one generation's tokens and how it ended.
type output struct {
	Tokens []uint32
	Reason FinishReason
}

// outputs runs n generations of prompt [1, 2], up to 10 tokens each, one
// after another.
func outputs(t *testing.T, e *Engine, n int) []output {
	t.Helper()
	var got []output
	for range n {
		chunks, err := collect(t.Context(), e, Request{ID: "s", Prompt: []uint32{1, 2}, MaxNewTokens: 10})
		if err != nil {
			t.Fatalf("Generate() error = %v, want nil", err)
		}
		var o output
		for _, c := range chunks {
			o.Tokens = append(o.Tokens, c.Tokens...)
			if c.Finish != nil {
				o.Reason = c.Finish.Reason
			}
		}
		got = append(got, o)
	}
	return got
}

// TestScriptSeq: each new generation takes the next script, and the last
// stays for the rest, as an agent loop's steps (a tool call, then the
// answer) need; a script without tokens is OutputToken's output.
func TestScriptSeq(t *testing.T) {
	t.Parallel()
	plain := output{seq(0, []uint32{1, 2}, 10), FinishLength}
	tests := map[string]struct {
		scripts []Script
		want    []output
	}{
		"none": {nil, []output{plain, plain}},
		"one":  {[]Script{{Tokens: []uint32{7}, EOS: true}}, []output{{[]uint32{7}, FinishStop}, {[]uint32{7}, FinishStop}}},
		"steps, the last stays": {
			[]Script{{Tokens: []uint32{7, 8}, EOS: true}, {Tokens: []uint32{9}}, {Tokens: []uint32{5, 6}, EOS: true}},
			[]output{{[]uint32{7, 8}, FinishStop}, {[]uint32{9}, FinishLength}, {[]uint32{5, 6}, FinishStop}, {[]uint32{5, 6}, FinishStop}},
		},
		"an empty step": {
			[]Script{{Tokens: []uint32{7}, EOS: true}, {EOS: true}, {Tokens: []uint32{}}},
			[]output{{[]uint32{7}, FinishStop}, plain, plain, plain},
		},
		"longer than max_new_tokens": {
			[]Script{{Tokens: seq(3, nil, 12), EOS: true}},
			[]output{{seq(3, nil, 10), FinishLength}},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := New(Config{})
			t.Cleanup(e.Stop)
			e.ScriptSeq(tt.scripts...)
			if diff := cmp.Diff(tt.want, outputs(t, e, len(tt.want))); diff != "" {
				t.Errorf("outputs of ScriptSeq(%v) (-want +got):\n%s", tt.scripts, diff)
			}
		})
	}
}

// TestScriptSeqTakenByStartedOnly: a generation the engine refuses takes
// no script; a new ScriptSeq replaces the rest of the queue; ScriptSeq
// keeps no caller's slice.
func TestScriptSeqTakenByStartedOnly(t *testing.T) {
	t.Parallel()
	e := New(Config{})
	t.Cleanup(e.Stop)
	first := []uint32{7}
	e.ScriptSeq(Script{Tokens: first}, Script{Tokens: []uint32{8}}, Script{Tokens: []uint32{9}})
	first[0] = 99
	e.SetSleeping(true)
	if _, err := collect(t.Context(), e, Request{ID: "refused", MaxNewTokens: 10}); status.Code(err) != codes.Unavailable {
		t.Fatalf("Generate() asleep = %v, want UNAVAILABLE", err)
	}
	e.SetSleeping(false)
	want := []output{{[]uint32{7}, FinishLength}, {[]uint32{8}, FinishLength}}
	if diff := cmp.Diff(want, outputs(t, e, 2)); diff != "" {
		t.Errorf("after a refused generation (-want +got):\n%s", diff)
	}
	e.ScriptEOS([]uint32{4})
	want = []output{{[]uint32{4}, FinishStop}, {[]uint32{4}, FinishStop}}
	if diff := cmp.Diff(want, outputs(t, e, 2)); diff != "" {
		t.Errorf("ScriptEOS replacing the queue (-want +got):\n%s", diff)
	}
}
