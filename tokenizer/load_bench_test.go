package tokenizer

import (
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
)

// benchFamilies are the real families B11 measures.
var benchFamilies = []string{"llama3", "qwen3", "gemma3", "llama2", "gpt4o"}

// heapInUse is the heap in use after a full GC, in bytes.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}

// BenchmarkLoad loads each family: ns/op (wall), cpu-ms/op (the process's
// CPU time, the GC's included) and heap-MB, the heap in use after Load
// and a GC less the heap before (what a loaded Tokenizer keeps).
func BenchmarkLoad(b *testing.B) {
	for _, fam := range benchFamilies {
		b.Run(fam, func(b *testing.B) {
			dir := filepath.Join("testdata", "models", fam)
			if _, err := Load(dir); err != nil {
				b.Skip(err)
			}
			before := heapInUse()
			cpu0 := cpuTime()
			var tok *Tokenizer
			for b.Loop() {
				var err error
				if tok, err = Load(dir); err != nil {
					b.Fatal(err)
				}
			}
			cpu := cpuTime() - cpu0
			after := heapInUse()
			b.ReportMetric(float64(cpu.Milliseconds())/float64(b.N), "cpu-ms/op")
			b.ReportMetric(float64(int64(after)-int64(before))/(1<<20), "heap-MB")
			runtime.KeepAlive(tok)
		})
	}
}

// BenchmarkEncodeLongPrompt encodes inputs.json's 20,000-character "long
// prompt" (B11's text) with each family.
func BenchmarkEncodeLongPrompt(b *testing.B) {
	var in inputs
	readJSON(b, filepath.Join("testdata", "inputs.json"), &in)
	var text string
	for _, t := range in.Texts {
		if t.Name == "long prompt" {
			text = t.Text
		}
	}
	if text == "" {
		b.Fatal(`inputs.json has no "long prompt"`)
	}
	for _, fam := range benchFamilies {
		b.Run(fam, func(b *testing.B) {
			tok, err := loadFamily(fam)
			if err != nil {
				b.Skip(err)
			}
			b.SetBytes(int64(len(text)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := tok.Encode(text, false); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// cpuTime is the process's user and system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// loaded caches Load of each testdata/models directory: one load per test
// binary, shared by the tests (a Tokenizer is safe for concurrent use).
var loaded sync.Map // dir → *loadResult

type loadResult struct {
	once sync.Once
	tok  *Tokenizer
	err  error
}

// loadDir is Load(dir), once per test binary.
func loadDir(dir string) (*Tokenizer, error) {
	v, _ := loaded.LoadOrStore(dir, &loadResult{})
	r := v.(*loadResult)
	r.once.Do(func() { r.tok, r.err = Load(dir) })
	return r.tok, r.err
}

// loadFamily is loadDir of testdata/models/fam.
func loadFamily(fam string) (*Tokenizer, error) {
	return loadDir(filepath.Join("testdata", "models", fam))
}
