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
		engines []string
		quick   bool
		wantErr bool
	}{
		"defaults":         {nil, figureNames(), []string{"vllm", "sglang", "trtllm"}, false, false},
		"quick subset":     {[]string{"-quick", "-figures", "b2, B1,B2"}, []string{"B2", "B1"}, engineNames(), true, false},
		"engines in order": {[]string{"-engines", "SGLang, vllm,sglang"}, figureNames(), []string{"sglang", "vllm"}, false, false},
		"unknown figure":   {[]string{"-figures", "B9"}, nil, nil, false, true},
		"unknown engine":   {[]string{"-engines", "tgi"}, nil, nil, false, true},
		"stray argument":   {[]string{"extra"}, nil, nil, false, true},
		"empty figure set": {[]string{"-figures", ""}, nil, nil, false, true},
		"empty engine set": {[]string{"-engines", ""}, nil, nil, false, true},
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
