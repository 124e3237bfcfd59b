package main

import (
	"slices"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	"github.com/vigilhq/vigil/sdk"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args    []string
		figures []string
		engines []string
		quick   bool
		wantErr bool
	}{
		"defaults":         {nil, figureNames(), []string{"vllm", "sglang", "trtllm"}, false, false},
		"quick subset":     {[]string{"-quick", "-figures", "b2, B1,B2"}, []string{"B2", "B1"}, engineNames(), true, false},
		"engines in order": {[]string{"-engines", "SGLang, vllm,sglang"}, figureNames(), []string{"sglang", "vllm"}, false, false},
		"unknown figure":   {[]string{"-figures", "B99"}, nil, nil, false, true},
		"unknown engine":   {[]string{"-engines", "tgi"}, nil, nil, false, true},
		"stray argument":   {[]string{"extra"}, nil, nil, false, true},
		"empty figure set": {[]string{"-figures", ""}, nil, nil, false, true},
		"empty engine set": {[]string{"-engines", ""}, nil, nil, false, true},
		// Profiles go to -out, whose default is in the repository.
		"profile without out": {[]string{"-profile"}, nil, nil, false, true},
		"profile with out":    {[]string{"-profile", "-out", "/tmp/b"}, figureNames(), engineNames(), false, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := parseFlags(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseFlags(%q) error = %v, want error %v", tc.args, err, tc.wantErr)
			}
			if err != nil {
				return
			}
			var engines []string
			for _, e := range got.engines {
				engines = append(engines, e.Name)
			}
			if !slices.Equal(got.figures, tc.figures) || !slices.Equal(engines, tc.engines) || got.quick != tc.quick {
				t.Errorf("parseFlags(%q) = figures %v engines %v quick %v, want %v %v %v", tc.args, got.figures, engines, got.quick, tc.figures, tc.engines, tc.quick)
			}
		})
	}
}

// -vigil-env takes NAME=VALUE pairs, which reach every vigil and, named by
// --plugin-env, its adapter.
func TestVigilEnv(t *testing.T) {
	t.Parallel()
	o, err := parseFlags([]string{"-vigil-env", "GOGC=400,GODEBUG=a=1"})
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"GOGC=400", "GODEBUG=a=1"}; !slices.Equal(o.vigilEnv, want) {
		t.Errorf("vigilEnv = %q, want %q", o.vigilEnv, want)
	}
	for _, bad := range []string{"GOGC", "=1", "GOGC=1,"} {
		if _, err := parseFlags([]string{"-vigil-env", bad}); err == nil {
			t.Errorf("-vigil-env %q: no error, want one naming the flag", bad)
		}
	}
	e := &env{vigilEnv: o.vigilEnv}
	var opts harness.VigilOpts
	e.addVigilEnv(&opts)
	if want := []string{"--plugin-env", "GOGC", "--plugin-env", "GODEBUG"}; !slices.Equal(opts.Extra, want) || !slices.Equal(opts.Env, o.vigilEnv) {
		t.Errorf("vigil gets env %q and flags %q, want %q and %q", opts.Env, opts.Extra, o.vigilEnv, want)
	}
}

func TestWithdrawSeq(t *testing.T) {
	t.Parallel()
	for id, want := range map[string]int{"b7x-12-3": 12, "b7x-0-17": 0, "b7x-5": -1, "b7r-12-3": -1, "b7x-a-1": -1, "": -1} {
		got, ok := withdrawSeq(id)
		if !ok {
			got = -1
		}
		if got != want {
			t.Errorf("withdrawSeq(%q) = %d, want %d", id, got, want)
		}
	}
}

// B10's target is the lease of an answered PING plus B3's frozen-engine
// bound, from the policy it runs with.
func TestBusyFrozenBound(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy sdk.HealthPolicy
		want   time.Duration
	}{
		{sdk.HealthPolicy{}, 12750 * time.Millisecond},
		{sdk.HealthPolicy{BusyTimeout: quickBusyTimeout}, 3750 * time.Millisecond},
		{sdk.HealthPolicy{Interval: time.Second, Timeout: 2 * time.Second, Failures: 3, BusyTimeout: time.Minute}, 20*time.Second + 3*time.Second + 500*time.Millisecond + 4*time.Second},
	} {
		if got := busyFrozenBound(tc.policy.WithDefaults()); got != tc.want {
			t.Errorf("busyFrozenBound(%+v) = %v, want %v", tc.policy, got, tc.want)
		}
	}
}
