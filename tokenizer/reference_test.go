package tokenizer

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// requireModels makes a missing model directory a failure, not a skip: CI
// sets it after make tokenizer-models.
const requireModels = "VIGIL_REQUIRE_TOKENIZER_MODELS"

// reference is one family's testdata/<family>.json, written by
// fixtures/generate.sh from @lenml/tokenizers (fixtures/shape_test.go
// checks its shape).
type reference struct {
	Family  string `json:"family"`
	Refused *struct {
		Field string `json:"field"`
		Value string `json:"value"`
	} `json:"refused"`
	Config struct {
		AddBOS  *bool   `json:"add_bos_token"`
		AddEOS  *bool   `json:"add_eos_token"`
		BOS     *uint32 `json:"bos_token_id"`
		EOS     *uint32 `json:"eos_token_id"`
		Rebuild bool    `json:"rebuilds_post_processor"`
	} `json:"config"`
	// Texts[i] is inputs.json's Texts[i]; ids_special is special_prefix
	// + ids + special_suffix when those are given, ids when none of the
	// three is; a nil decoding is the text.
	Texts []struct {
		Name               string   `json:"name"`
		Long               bool     `json:"long"` // only decoded is recorded
		IDs                []uint32 `json:"ids"`
		IDsSpecial         []uint32 `json:"ids_special"`
		SpecialPrefix      []uint32 `json:"special_prefix"`
		SpecialSuffix      []uint32 `json:"special_suffix"`
		Decoded            *string  `json:"decoded"`
		DecodedSpecial     *string  `json:"decoded_special"`
		DecodedSkipSpecial *string  `json:"decoded_skip_special"`
	} `json:"texts"`
	InContext []struct {
		Name      string   `json:"name"`
		PromptIDs []uint32 `json:"prompt_ids"`
		OutputIDs []uint32 `json:"output_ids"`
		Text      string   `json:"text"`
	} `json:"in_context"`
}

// inputs is testdata/inputs.json: the texts, in every family's order.
type inputs struct {
	Texts []struct {
		Name string `json:"name"`
		Text string `json:"text"`
	} `json:"texts"`
}

func readJSON(t testing.TB, file string, v any) {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

// TestReference checks every family in testdata/models against its
// references: Encode's ids, Decode's text, and a stream's text in the
// prompt's context; a refused file must be a *FieldError naming the field.
func TestReference(t *testing.T) {
	dirs, _ := filepath.Glob(filepath.Join("testdata", "models", "*", "tokenizer.json"))
	if len(dirs) == 0 {
		if os.Getenv(requireModels) != "" {
			t.Fatalf("%s is set but testdata/models is empty: run make tokenizer-models", requireModels)
		}
		t.Skipf("testdata/models missing: run make tokenizer-models (CI sets %s)", requireModels)
	}
	var in inputs
	readJSON(t, filepath.Join("testdata", "inputs.json"), &in)
	for _, file := range dirs {
		dir := filepath.Dir(file)
		t.Run(filepath.Base(dir), func(t *testing.T) { checkFamily(t, dir, &in) })
	}
}

func checkFamily(t *testing.T, dir string, in *inputs) {
	var ref reference
	readJSON(t, filepath.Join("testdata", filepath.Base(dir)+".json"), &ref)
	tok, err := Load(dir)
	if ref.Refused != nil {
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != ref.Refused.Field {
			t.Fatalf("Load(%s) = %v; want a *FieldError naming %s", dir, err, ref.Refused.Field)
		}
		return
	}
	if err != nil {
		t.Fatalf("Load(%s): %v", dir, err)
	}
	if len(ref.Texts) != len(in.Texts) {
		t.Fatalf("%d texts, inputs.json has %d: run make tokenizer-fixtures", len(ref.Texts), len(in.Texts))
	}
	orText := func(s *string, text string) string {
		if s == nil {
			return text
		}
		return *s
	}
	for i, c := range ref.Texts {
		text := in.Texts[i].Text
		want := c.IDsSpecial
		if want == nil {
			want = slices.Concat(c.SpecialPrefix, c.IDs, c.SpecialSuffix)
		}
		if ref.Config.Rebuild {
			want = configured(t, &ref, c.IDs)
		}
		checkEncode(t, tok, c.Name, text, false, c.IDs)
		checkEncode(t, tok, c.Name, text, true, want)
		checkDecode(t, tok, c.Name, c.IDs, false, orText(c.Decoded, text))
		if c.Long {
			continue
		}
		checkDecode(t, tok, c.Name, want, false, orText(c.DecodedSpecial, text))
		checkDecode(t, tok, c.Name, want, true, orText(c.DecodedSkipSpecial, text))
	}
	for _, c := range ref.InContext {
		checkStream(t, tok, c.Name, c.PromptIDs, c.OutputIDs, c.Text)
	}
}

// configured is what transformers' update_post_processor adds for the
// classes it rebuilds the post-processor for (issue 24 item 6): the
// configuration decides, not the file (nor transformers.js, which ignores
// add_bos_token/add_eos_token).
func configured(t *testing.T, ref *reference, ids []uint32) []uint32 {
	t.Helper()
	var out []uint32
	if ref.Config.AddBOS != nil && *ref.Config.AddBOS {
		if ref.Config.BOS == nil {
			t.Fatal("add_bos_token without a bos_token_id")
		}
		out = append(out, *ref.Config.BOS)
	}
	out = append(out, ids...)
	if ref.Config.AddEOS != nil && *ref.Config.AddEOS {
		if ref.Config.EOS == nil {
			t.Fatal("add_eos_token without an eos_token_id")
		}
		out = append(out, *ref.Config.EOS)
	}
	return out
}

func checkEncode(t *testing.T, tok *Tokenizer, name, text string, special bool, want []uint32) {
	t.Helper()
	got, err := tok.Encode(text, special)
	if err != nil {
		t.Errorf("%s: Encode(special=%v): %v", name, special, err)
		return
	}
	if !slices.Equal(got, want) {
		t.Errorf("%s: Encode(special=%v)\n got %v\nwant %v", name, special, abbrev(got), abbrev(want))
	}
}

func checkDecode(t *testing.T, tok *Tokenizer, name string, ids []uint32, skip bool, want string) {
	t.Helper()
	got, err := tok.Decode(ids, skip)
	if err != nil {
		t.Errorf("%s: Decode(skip=%v): %v", name, skip, err)
		return
	}
	if got != want {
		t.Errorf("%s: Decode(skip=%v)\n got %q\nwant %q", name, skip, abbrevString(got), abbrevString(want))
	}
}

// checkStream streams the output ids, split in chunks of several sizes,
// through a Decoder seeded with the prompt: the text must be the
// reference's decode(prompt + output) minus decode(prompt).
func checkStream(t *testing.T, tok *Tokenizer, name string, prompt, output []uint32, want string) {
	t.Helper()
	for _, size := range []int{1, 2, 3, len(output)} {
		d := tok.NewDecoder(false, prompt)
		var b strings.Builder
		for ids := range slices.Chunk(output, max(size, 1)) {
			b.WriteString(d.Next(ids))
		}
		b.WriteString(d.Flush())
		if got := b.String(); got != want {
			t.Errorf("%s: streamed in chunks of %d: got %q, want %q", name, size, got, want)
		}
	}
}

func abbrev(ids []uint32) any {
	if len(ids) > 40 {
		return struct {
			Len        int
			Head, Tail []uint32
		}{len(ids), ids[:20], ids[len(ids)-20:]}
	}
	return ids
}

func abbrevString(s string) string {
	if r := []rune(s); len(r) > 200 {
		return string(r[:100]) + "…" + string(r[len(r)-100:])
	}
	return s
}
