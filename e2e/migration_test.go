package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/vigilhq/vigil/e2e/harness"
	workerv1 "github.com/vigilhq/vigil/proto/vigil/worker/v1"
	"github.com/vigilhq/vigil/sdk/enginemock"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// migrationMax is each migrated request's max_tokens: at the mock's 20 ms
// a token, a stream of about 2.4 s, long enough to break in.
const migrationMax = 120

// migrationPrompt is each migrated request's prompt.
var migrationPrompt = []uint32{1, 2, 3}

// TestStreamMigration: a stream whose worker cannot finish it goes on, on
// another worker, from the tokens already sent, whatever broke it: its
// engine killed, its vigil killed (no final message), its vigil
// terminated and the grace period over. The client sees one stream: the
// tokens the first engine made, then those the next made from the prompt
// and them, 120 in all, finish LENGTH and usage of 120, over gRPC and over
// HTTP. With --max-migrations 0 the client gets the failure, as before.
// Each engine's workers have Llama 3's tokenizer, so they list resume.
func TestStreamMigration(t *testing.T) {
	skipShort(t)
	t.Parallel()
	forEachEngine(t, func(t *testing.T, e *engine) {
		skipVariant(t, e)
		testStreamMigration(t, e)
	})
}

// migrationWorker is one engine and its vigil.
type migrationWorker struct {
	m *mock
	v *vigil
}

func testStreamMigration(t *testing.T, e *engine) {
	dir, _ := fixtureTokenizer(t, "llama3")
	c := consulFor(t)
	svc := uniqueService(t)
	first := e == firstEngine()
	n := 4
	if first {
		n++ // one more for the case without migration
	}
	ws := make([]migrationWorker, n)
	for i := range ws {
		m := startMock(t, e, harness.MockOpts{GRPC: addr(freePort(t)), TokenDelay: delay(20 * time.Millisecond)})
		v := startVigil(t, vigilOpts{engine: e, engineAddr: m.GRPC, consul: c, service: svc,
			extra: []string{"--tokenizer-dir", dir, "--grace-period", "500ms"}})
		ws[i] = migrationWorker{m, v}
	}
	for _, w := range ws {
		w.v.waitLine("worker registered", 120*time.Second)
	}
	c.passing(t, svc, 60*time.Second, count(n))
	metricsAddr := addr(freePort(t))
	r := startRouter(t, c, svc, 1, "--metrics-listen", metricsAddr)
	rc := workerClient(t, r.GRPC)

	if first {
		t.Run("max-migrations 0", func(t *testing.T) {
			off := startRouter(t, c, svc, 1, "--max-migrations", "0")
			res := breakStream(t, workerClient(t, off.GRPC), ws, func(w migrationWorker) { w.m.signal(syscall.SIGKILL) })
			if status.Code(res.err) != codes.Unavailable || len(res.tokens) >= migrationMax {
				t.Errorf("without migration: %d tokens, then %v; want fewer than %d, then UNAVAILABLE", len(res.tokens), res.err, migrationMax)
			}
		})
	}
	t.Run("engine killed", func(t *testing.T) {
		res := breakStream(t, rc, ws, func(w migrationWorker) { w.m.signal(syscall.SIGKILL) })
		checkMigrated(t, res)
	})
	t.Run("vigil killed, over HTTP", func(t *testing.T) {
		testMigratedHTTP(t, "http://"+r.HTTP, e.servedModel, ws, func(w migrationWorker) { w.v.signal(syscall.SIGKILL) })
	})
	t.Run("vigil terminated, grace cut", func(t *testing.T) {
		res := breakStream(t, rc, ws, func(w migrationWorker) { w.v.signal(syscall.SIGTERM) })
		checkMigrated(t, res)
	})
	awaitMetric(t, metricsAddr, fmt.Sprintf(`vigil_route_stream_migrations_total{model=%q,result="resumed"}`, e.servedModel), 3, 10*time.Second)
}

// breakStream sends a long request through rc, breaks its worker with
// brk once five tokens came, and reads the stream to its end.
func breakStream(t *testing.T, rc workerv1.WorkerClient, ws []migrationWorker, brk func(migrationWorker)) completion {
	t.Helper()
	started := make(chan struct{})
	done := make(chan completion, 1)
	go func() {
		var once sync.Once
		done <- generate(context.Background(), rc, tokenPrompt("long", migrationMax, migrationPrompt...), func(n int) {
			if n >= 5 {
				once.Do(func() { close(started) })
			}
		})
	}()
	select {
	case <-started:
	case res := <-done:
		t.Fatalf("the stream ended before it could be broken: %d tokens, %v", len(res.tokens), res.err)
	}
	brk(serving(t, ws))
	select {
	case res := <-done:
		return res
	case <-time.After(30 * time.Second):
		t.Fatal("the stream did not end within 30s of its worker breaking")
	}
	return completion{}
}

// serving is the worker whose engine generates now.
func serving(t *testing.T, ws []migrationWorker) migrationWorker {
	t.Helper()
	for _, w := range ws {
		if !w.m.exited() && !w.v.exited() && w.m.state(t).InFlight > 0 {
			return w
		}
	}
	t.Fatal("no engine generates the stream")
	return migrationWorker{}
}

// migratedTokens is a stream migrated after k tokens: the first engine's
// first k tokens, then those the next engine made from the prompt and
// them, migrationMax in all.
func migratedTokens(k int) []uint32 {
	var out []uint32
	for i := range k {
		out = append(out, enginemock.OutputToken(0, migrationPrompt, i))
	}
	prompt := append(slices.Clone(migrationPrompt), out...)
	for j := range migrationMax - k {
		out = append(out, enginemock.OutputToken(0, prompt, j))
	}
	return out
}

// migrated returns the k for which got is migratedTokens(k); 0 when
// there is none.
func migrated(got []uint32) int {
	for k := 1; k < migrationMax; k++ {
		if slices.Equal(got, migratedTokens(k)) {
			return k
		}
	}
	return 0
}

func checkMigrated(t *testing.T, res completion) {
	t.Helper()
	if res.err != nil {
		t.Fatalf("the stream failed: %v (after %d tokens)", res.err, len(res.tokens))
	}
	if k := migrated(res.tokens); k < 5 {
		t.Errorf("tokens %v: want the first engine's (at least 5), then the next engine's from the prompt and them", res.tokens)
	}
	if f := res.final; f.GetFinishReason() != workerv1.FinishReason_FINISH_REASON_LENGTH || f.GetUsage().GetCompletionTokens() != migrationMax ||
		f.GetUsage().GetPromptTokens() != uint32(len(migrationPrompt)) {
		t.Errorf("final %v: want LENGTH, %d completion and %d prompt tokens", f, migrationMax, len(migrationPrompt))
	}
}

// testMigratedHTTP streams a completion of token ids from base, breaks
// its worker with brk once five events came, and checks the text is the
// migrated tokens' (POST /detokenize), finish length and usage whole.
func testMigratedHTTP(t *testing.T, base, model string, ws []migrationWorker, brk func(migrationWorker)) {
	body := fmt.Sprintf(`{"model":%q,"prompt":%s,"max_tokens":%d,"stream":true,"stream_options":{"include_usage":true}}`,
		model, mustJSON(t, migrationPrompt), migrationMax)
	resp, err := http.Post(base+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text, finish string
	var completionTokens float64
	events := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var ev struct {
			Choices []struct {
				Text         string  `json:"text"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				CompletionTokens float64 `json:"completion_tokens"`
			} `json:"usage"`
			Error any `json:"error"`
		}
		if err := json.Unmarshal([]byte(data), &ev); err != nil || ev.Error != nil {
			t.Fatalf("event %s: %v", data, err)
		}
		for _, c := range ev.Choices {
			text += c.Text
			if c.FinishReason != nil {
				finish = *c.FinishReason
			}
		}
		if ev.Usage != nil {
			completionTokens = ev.Usage.CompletionTokens
		}
		if events++; events == 5 {
			brk(serving(t, ws))
		}
	}
	if finish != "length" || completionTokens != migrationMax {
		t.Errorf("finish %q, %v completion tokens; want length and %d", finish, completionTokens, migrationMax)
	}
	if !migratedText(t, base, model, text) {
		t.Errorf("text %q: want the text of the first engine's tokens, then the next engine's from the prompt and them", text)
	}
}

// migratedText reports whether text is that of migrated tokens, for some
// number of them from the first engine.
func migratedText(t *testing.T, base, model, text string) bool {
	for k := 1; k < migrationMax; k++ {
		code, _, resp := post(t, base+"/detokenize", fmt.Sprintf(`{"model":%q,"tokens":%s}`, model, mustJSON(t, migratedTokens(k))))
		var detok struct {
			Prompt string `json:"prompt"`
		}
		if code != 200 || json.Unmarshal([]byte(resp), &detok) != nil {
			t.Fatalf("detokenize: %d %s", code, resp)
		}
		if detok.Prompt == text {
			return true
		}
	}
	return false
}
