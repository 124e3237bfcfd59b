package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/vigilhq/vigil/bench/internal/report"
	"github.com/vigilhq/vigil/e2e/harness"
	"github.com/vigilhq/vigil/tokenizer"
)

// tokenizerFamilies are the real tokenizer files of tokenizer/testdata/models
// (`make tokenizer-models`) B11 measures; quick mode takes the first alone.
var tokenizerFamilies = []string{"llama3", "qwen3", "gemma3", "llama2", "gpt4o"}

const (
	// longPrompt is the name of inputs.json's generated 20,000-character text.
	longPrompt = "long prompt"
	// idleRSSTarget is B6's idle memory target, held with each family loaded too.
	idleRSSTarget = "40 MB"
	// scaleTarget bounds time(80,000 chars) / time(20,000 chars).
	scaleTarget = 4.5
)

// encodeRuns are the untimed warm-up runs and the timed runs of one encoding.
func (e *env) encodeRuns() (warm, runs int) {
	if e.quick {
		return 2, 5
	}
	return 5, 31
}

func figB11(e *env) ([]report.Row, error) {
	if _, err := exec.LookPath("node"); err != nil {
		return nil, fmt.Errorf("B11 compares with @lenml/tokenizers in node, and node is not on PATH: %w", err)
	}
	text, err := longPromptText(e.root)
	if err != nil {
		return nil, err
	}
	textFile := filepath.Join(e.h.Dir, "tokenizer-long-prompt.txt")
	if err := os.WriteFile(textFile, []byte(text), 0o644); err != nil {
		return nil, fmt.Errorf("the prompt for node: %w", err)
	}
	families := tokenizerFamilies
	if e.quick {
		families = families[:1]
	}
	var rows []report.Row
	for _, fam := range families {
		dir := filepath.Join(e.root, "tokenizer", "testdata", "models", fam)
		if _, err := os.Stat(filepath.Join(dir, "tokenizer.json")); err != nil {
			rows = append(rows, report.Row{Figure: "B11", Metric: fam + ": not measured",
				Value: "no " + filepath.Join(dir, "tokenizer.json") + " (make tokenizer-models)"})
			continue
		}
		progress("B11: %s", fam)
		r, err := e.encodeRows(fam, dir, text, textFile)
		rows = append(rows, r...)
		if err != nil {
			return rows, fmt.Errorf("%s: %w", fam, err)
		}
		if e.quick {
			continue
		}
		rss, err := e.tokenizerRSSRow(fam, dir)
		if err != nil {
			return rows, fmt.Errorf("%s: idle memory: %w", fam, err)
		}
		rows = append(rows, rss)
	}
	return rows, nil
}

// longPromptText reads the generated prompt from tokenizer/testdata/inputs.json.
func longPromptText(root string) (string, error) {
	path := filepath.Join(root, "tokenizer", "testdata", "inputs.json")
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	var in struct {
		Texts []struct{ Name, Text string } `json:"texts"`
	}
	if err := json.Unmarshal(data, &in); err != nil {
		return "", fmt.Errorf("%s: %w", path, err)
	}
	for _, t := range in.Texts {
		if t.Name == longPrompt {
			return t.Text, nil
		}
	}
	return "", fmt.Errorf("%s has no text named %q", path, longPrompt)
}

// encodeRows times vigil's and node's encoding of text, and vigil's of it
// repeated 4 times.
func (e *env) encodeRows(fam, dir, text, textFile string) ([]report.Row, error) {
	tok, err := tokenizer.Load(dir)
	if err != nil {
		return nil, err
	}
	warm, runs := e.encodeRuns()
	vigil, tokens, err := timeEncode(tok, text, warm, runs)
	if err != nil {
		return nil, err
	}
	long, _, err := timeEncode(tok, strings.Repeat(text, 4), warm, runs)
	if err != nil {
		return nil, err
	}
	node, nodeTokens, err := e.nodeEncode(dir, textFile, warm, runs)
	if err != nil {
		return nil, err
	}
	ratio := float64(vigil) / float64(node)
	scale := float64(long) / float64(vigil)
	return []report.Row{
		{Figure: "B11", Metric: fmt.Sprintf("%s: encode 20,000 chars, vigil / @lenml/tokenizers (median of %d)", fam, runs),
			Value:  fmt.Sprintf("%s / %s = %.2f", report.Dur(vigil), report.Dur(node), ratio),
			Target: "vigil <= node",
			Data: map[string]any{"vigil_ms": report.Ms(vigil), "node_ms": report.Ms(node), "ratio": ratio,
				"vigil_tokens": tokens, "node_tokens": nodeTokens}},
		{Figure: "B11", Metric: fmt.Sprintf("%s: vigil time(80,000 chars) / time(20,000 chars)", fam),
			Value:  fmt.Sprintf("%s / %s = %.2f", report.Dur(long), report.Dur(vigil), scale),
			Target: fmt.Sprintf("<= %.1f", scaleTarget),
			Data:   map[string]any{"long_ms": report.Ms(long), "ms": report.Ms(vigil), "ratio": scale}},
	}, nil
}

// timeEncode encodes text warm times untimed, then runs times, and returns
// the median run and the token count.
func timeEncode(tok *tokenizer.Tokenizer, text string, warm, runs int) (time.Duration, int, error) {
	var n int
	for range warm {
		ids, err := tok.Encode(text, false)
		if err != nil {
			return 0, 0, err
		}
		n = len(ids)
	}
	ds := make([]time.Duration, runs)
	for i := range ds {
		start := time.Now()
		if _, err := tok.Encode(text, false); err != nil {
			return 0, 0, err
		}
		ds[i] = time.Since(start)
	}
	return median(ds), n, nil
}

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// nodeEncode runs tokenizer.js on the same files and returns the median of
// its timed runs and its token count.
func (e *env) nodeEncode(dir, textFile string, warm, runs int) (time.Duration, int, error) {
	npm := filepath.Join(e.root, "scripts", "tokenizer-fixtures", "node_modules")
	if _, err := os.Stat(filepath.Join(npm, "@lenml", "tokenizers")); err != nil {
		return 0, 0, fmt.Errorf("no @lenml/tokenizers under %s (make tokenizer-models installs it): %w", npm, err)
	}
	script := filepath.Join(e.root, "bench", "cmd", "vigil-bench", "tokenizer.js")
	cmd := exec.Command("node", script, npm, dir, textFile, strconv.Itoa(warm), strconv.Itoa(runs))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return 0, 0, fmt.Errorf("node %s: %w: %s", script, err, strings.TrimSpace(stderr.String()))
	}
	var res struct {
		NS     []int64 `json:"ns"`
		Tokens int     `json:"tokens"`
	}
	if err := json.Unmarshal(out, &res); err != nil {
		return 0, 0, fmt.Errorf("node %s printed %q: %w", script, out, err)
	}
	if len(res.NS) == 0 {
		return 0, 0, errors.New("node printed no timings")
	}
	ds := make([]time.Duration, len(res.NS))
	for i, ns := range res.NS {
		ds[i] = time.Duration(ns)
	}
	return median(ds), res.Tokens, nil
}

// tokenizerRSSRow reads B6's idle memory of vigil plus adapter with the
// family loaded (`vigil run --tokenizer-dir`), against the engine's mock.
func (e *env) tokenizerRSSRow(fam, dir string) (report.Row, error) {
	m, err := e.startMock("")
	if err != nil {
		return report.Row{}, err
	}
	defer m.Kill()
	if _, err := m.WaitLine("serving", harness.StartTimeout); err != nil {
		return report.Row{}, err
	}
	reg, err := e.fileRegistry()
	if err != nil {
		return report.Row{}, err
	}
	v, err := e.startVigil(harness.VigilOpts{EngineAddr: m.GRPC, RegistryDir: reg, Service: "llm",
		Extra: []string{"--tokenizer-dir", dir}})
	if err != nil {
		return report.Row{}, err
	}
	defer v.Kill()
	if _, err := v.WaitLine("worker registered", harness.StartTimeout); err != nil {
		return report.Row{}, err
	}
	pids := harness.Tree(v.Pid())
	if len(pids) < 2 {
		return report.Row{}, fmt.Errorf("vigil (pid %d) has no adapter child", v.Pid())
	}
	time.Sleep(idleSettle)
	rss, err := harness.RSS(pids)
	if err != nil {
		return report.Row{}, err
	}
	return report.Row{Figure: "B11", Metric: fmt.Sprintf("%s: RSS of vigil + adapter, idle, --tokenizer-dir %s (as B6)", fam, fam),
		Value: mb(rss), Target: idleRSSTarget, Data: map[string]int64{"rss_bytes": rss}}, nil
}
