package command

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/vigilhq/vigil/sdk"
)

// Every flag the field table names is a flag of vigil run.
func TestFieldFlagsExist(t *testing.T) {
	var names []string
	for _, f := range runCommand().Flags {
		names = append(names, f.Names()...)
	}
	for field, flag := range fieldFlags {
		if !slices.Contains(names, flag) {
			t.Errorf("fieldFlags[%q] = %q, not a flag of vigil run", field, flag)
		}
	}
}

func TestNamingFlags(t *testing.T) {
	plain := fmt.Errorf("%w: mode", sdk.ErrInvalidArgument)
	other := &sdk.FieldError{Field: "StartRequest.Other", Problem: `"x": bad`}
	tests := map[string]struct {
		err  error
		want string
	}{
		"engine option": {
			err:  fmt.Errorf("vLLM adapter: %w", &sdk.FieldError{Field: sdk.FieldOptions, Problem: `"tp": unknown key; this adapter takes no engine options`}),
			want: `--engine-option "tp": unknown key; this adapter takes no engine options`,
		},
		"health policy": {
			err:  &sdk.FieldError{Field: sdk.FieldHealthRetryMax, Problem: "-1ms: must be a positive duration"},
			want: "--engine-retry-max -1ms: must be a positive duration",
		},
		"no field":         {err: plain, want: plain.Error()},
		"field of no flag": {err: other, want: other.Error()},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := namingFlags(tt.err)
			if diff := cmp.Diff(tt.want, got.Error()); diff != "" {
				t.Errorf("namingFlags(%q) message mismatch (-want +got):\n%s", tt.err, diff)
			}
			if !errors.Is(got, sdk.ErrInvalidArgument) {
				t.Errorf("namingFlags(%q) = %v, want it still wrapping sdk.ErrInvalidArgument", tt.err, got)
			}
		})
	}
}

// The health and startup flags default to the sdk's defaults, written once
// in package sdk.
func TestStartDefaults(t *testing.T) {
	cfg, err := parseRunArgs(t)
	if err != nil {
		t.Fatalf("parse: %v", err)
	}
	want := sdk.StartRequest{
		EngineAddr:      "127.0.0.1:50051",
		StartupDeadline: sdk.DefaultStartupDeadline,
		Health:          sdk.HealthPolicy{}.WithDefaults(),
	}
	if diff := cmp.Diff(want, cfg.start); diff != "" {
		t.Errorf("start request with no flags mismatch (-want +got):\n%s", diff)
	}
}
