package main

import (
	"slices"
	"testing"
)

func TestParseFlags(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		args    []string
		figures []string
		quick   bool
		wantErr bool
	}{
		"defaults":         {nil, figureNames(), false, false},
		"quick subset":     {[]string{"-quick", "-figures", "b2, B1,B2"}, []string{"B2", "B1"}, true, false},
		"unknown figure":   {[]string{"-figures", "B9"}, nil, false, true},
		"stray argument":   {[]string{"extra"}, nil, false, true},
		"empty figure set": {[]string{"-figures", ""}, nil, false, true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			got, err := parseFlags(tc.args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseFlags(%q) error = %v, want error %v", tc.args, err, tc.wantErr)
			}
			if err == nil && (!slices.Equal(got.figures, tc.figures) || got.quick != tc.quick) {
				t.Errorf("parseFlags(%q) = figures %v quick %v, want %v %v", tc.args, got.figures, got.quick, tc.figures, tc.quick)
			}
		})
	}
}

func TestParseEngines(t *testing.T) {
	t.Parallel()
	// A nil want is an error.
	for list, want := range map[string][]string{
		"trtllm":              {"trtllm"},
		"TRTLLM, vllm,trtllm": {"trtllm", "vllm"},
		"vllm,tgi":            nil,
		"":                    nil,
	} {
		got, err := parseEngines(list)
		if names := engineNamesOf(got); (err != nil) != (want == nil) || !slices.Equal(names, want) {
			t.Errorf("parseEngines(%q) = %v, %v; want %v", list, names, err, want)
		}
	}
	if o, err := parseFlags(nil); err != nil || !slices.Equal(engineNamesOf(o.engines), engineNames()) {
		t.Errorf("parseFlags() = engines %v, %v; want every engine, %v", engineNamesOf(o.engines), err, engineNames())
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
