package jinja

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
)

type corpusCase struct {
	Name        string          `json:"name"`
	Template    string          `json:"template"`
	TemplateRef string          `json:"template_ref"`
	Context     json.RawMessage `json:"context"`
	ContextRef  string          `json:"context_ref"`
	Rendering   *string         `json:"rendering"`
	Error       *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func loadCorpus(t testing.TB) []corpusCase {
	raw, err := os.ReadFile("testdata/corpus.json")
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Contexts  map[string]json.RawMessage `json:"contexts"`
		Templates map[string]string          `json:"templates"`
		Cases     []corpusCase               `json:"cases"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatal(err)
	}
	for i := range c.Cases {
		cc := &c.Cases[i]
		if cc.TemplateRef != "" {
			cc.Template = c.Templates[cc.TemplateRef]
		}
		if cc.ContextRef != "" {
			cc.Context = c.Contexts[cc.ContextRef]
		}
	}
	return c.Cases
}

// decodeOrdered decodes JSON keeping object order (a *Dict), as the host
// passes messages.
func decodeOrdered(d *json.Decoder) (any, error) {
	tok, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '[' {
			l := []any{}
			for d.More() {
				e, err := decodeOrdered(d)
				if err != nil {
					return nil, err
				}
				l = append(l, e)
			}
			_, err := d.Token()
			return l, err
		}
		m := NewDict()
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return nil, err
			}
			e, err := decodeOrdered(d)
			if err != nil {
				return nil, err
			}
			_ = m.Set(k.(string), e)
		}
		_, err := d.Token()
		return m, err
	case json.Number:
		if i, err := v.Int64(); err == nil {
			return i, nil
		}
		return v.Float64()
	}
	return tok, nil
}

func caseVars(t testing.TB, raw json.RawMessage) map[string]any {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	v, err := decodeOrdered(d)
	if err != nil {
		t.Fatal(err)
	}
	vars := map[string]any{}
	ctx := v.(*Dict)
	for i, k := range ctx.keys {
		vars[k.(string)] = ctx.vals[i]
	}
	return vars
}

func render(src string, vars map[string]any) (string, error) {
	tm, err := Compile(src)
	if err != nil {
		return "", err
	}
	return tm.Render(vars)
}

// isRefusal tells vigil's deliberate refusals (a construct or size it
// does not render) from a wrong failure.
func isRefusal(err error) bool {
	return err != nil && strings.Contains(err.Error(), "vigil") && !strings.Contains(err.Error(), "engine failed")
}

// TestCorpus requires vigil's rendering of each case to equal Python
// jinja2's in transformers' environment, or both to fail; vigil may
// refuse (an error naming vigil) what it does not render exactly.
func TestCorpus(t *testing.T) {
	pass, refused := 0, 0
	for _, c := range loadCorpus(t) {
		got, err := render(c.Template, caseVars(t, c.Context))
		switch {
		case c.Rendering != nil && err == nil && got == *c.Rendering:
			pass++
		case c.Error != nil && err != nil:
			pass++
		case c.Rendering != nil && isRefusal(err):
			refused++
			t.Logf("%s: refused: %v", c.Name, err)
		case c.Error != nil:
			t.Errorf("%s: %q\nPython raised %s: %s\nvigil rendered %q", c.Name, c.Template, c.Error.Type, c.Error.Message, got)
		default:
			t.Errorf("%s: %q\nPython: %q\nvigil:  %q (err %v)", c.Name, c.Template, *c.Rendering, got, err)
		}
	}
	t.Logf("corpus: %d equal to Python, %d refused", pass, refused)
}

func TestRaiseErrorIsTyped(t *testing.T) {
	_, err := render("{{ raise_exception('no') }}", nil)
	var re *RaiseError
	if !errors.As(err, &re) || re.Message != "no" {
		t.Fatalf("got %v, want a RaiseError", err)
	}
}
