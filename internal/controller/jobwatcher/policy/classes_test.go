package policy

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// costlyClasses are 1,024-byte patterns whose classes cost much more than
// their instructions: before parseRunes each was admitted, and compiling
// it took what the comment says (this machine, anchored as CompilePattern
// anchors, the parse tree printed back).
var costlyClasses = map[string]string{
	"Unicode classes (0.1 s, 22 MB)":               strings.Repeat(`\pL`, 341),
	"Unicode classes under (?i) (0.65 s, 22 MB)":   "(?i)" + strings.Repeat(`\pL`, 339),
	"negated Unicode classes (0.08 s, 22 MB)":      strings.Repeat(`\PL`, 341),
	"negated brackets of classes (0.04 s, 11 MB)":  strings.Repeat(`[^\pL]`, 170),
	"wide ranges under (?i) (0.53 s, 3 MB)":        "(?i)[" + strings.Repeat("B-\U0001e942", 169) + "]",
	"escaped wide ranges under (?i) (0.3 s, 1 MB)": "(?i)[" + strings.Repeat(`\x{42}-\x{1e942}`, 63) + "]",
	"a Unicode class in a flag group (?i:…)":       "a(?i:" + strings.Repeat(`[\p{Greek}]`, 90) + ")",
	"(?i) anywhere counts folding everywhere":      "(?i)(?-i)[" + strings.Repeat(`\x{42}-\x{1e942}`, 2) + "]",
}

// TestCompilePatternRefusesCostlyClassesWithoutParsingThem checks that each
// of costlyClasses is refused, saying why, and that refusing it allocates
// next to nothing: it is refused from its text, before it is parsed.
func TestCompilePatternRefusesCostlyClassesWithoutParsingThem(t *testing.T) {
	for name, pat := range costlyClasses {
		t.Run(name, func(t *testing.T) {
			if len(pat) > 1024 {
				t.Fatalf("%d bytes, over the schema's 1,024", len(pat))
			}
			_, err := CompilePattern(pat)
			if err == nil || !strings.Contains(err.Error(), "character classes cost more than 16384 runes") {
				t.Fatalf("CompilePattern: %v", err)
			}
			if allocated := allocatedBy(func() { _, _ = CompilePattern(pat) }); allocated > 64<<10 {
				t.Fatalf("refusing it allocated %d bytes", allocated)
			}
		})
	}
}

// allocatedBy is how many bytes f allocates, averaged over 10 calls.
func allocatedBy(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 10 {
		f()
	}
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / 10
}

// worstWatcher is a watcher of the costliest patterns admitted: Unicode
// classes repeated (all the runes a pattern may cost, and most of what is
// left to the watcher), 129 optional parts in a row (which cost Go's
// one-pass matcher the cube of their number), and wide literals to the
// instruction bound.
func worstWatcher() []PatternList {
	var chain strings.Builder
	for c := 'a'; chain.Len() < 1000; c += 2 {
		chain.WriteString("[" + string(c) + "-" + string(c+1) + "]*")
	}
	return []PatternList{
		{Field: "jobNamePatterns", Patterns: []string{`(?i)[\pC\pL\pN\pM]{1,1000}`, `[\pL\pN\pM]{1,1000}`, chain.String(), chain.String()}},
		{Field: "excludeJobNamePatterns", Patterns: []string{strings.Repeat("a", 1000), strings.Repeat("b", 1000), strings.Repeat("c", 900), strings.Repeat("(?:ab)?", 140)}},
	}
}

// TestTheWorstWatcherCostsUnderAMegabyte compiles worstWatcher, all of it
// admitted, and checks what it costs: what the compiled patterns keep, and
// what compiling them allocates.
func TestTheWorstWatcherCostsUnderAMegabyte(t *testing.T) {
	lists := worstWatcher()
	var total Cost
	for _, l := range lists {
		for _, p := range l.Patterns {
			c, err := PatternCost(p)
			if err != nil {
				t.Fatalf("%.40q: %v", p, err)
			}
			total.Program += c.Program
			total.Runes += c.Runes
		}
	}
	t.Logf("the worst watcher: %d instructions, %d runes", total.Program, total.Runes)
	if total.Program < MaxWatcherProgram*9/10 || total.Runes < MaxWatcherRunes*85/100 {
		t.Fatalf("the worst watcher is not near the bounds (%+v)", total)
	}
	if _, errs := CompilePatterns(lists...); len(errs) > 0 {
		t.Fatalf("refused: %v", errs)
	}
	allocated := allocatedBy(func() { _, _ = CompilePatterns(lists...) })
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	kept, _ := CompilePatterns(lists...)
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(kept)
	t.Logf("compiling it allocates %d KiB, the compiled patterns keep %d KiB", allocated>>10, (after.HeapAlloc-before.HeapAlloc)>>10)
	if allocated > 2<<20 {
		t.Errorf("compiling the worst watcher allocates %d bytes, over 2 MiB", allocated)
	}
	if after.HeapAlloc > before.HeapAlloc && after.HeapAlloc-before.HeapAlloc > 1<<20 {
		t.Errorf("the worst watcher's compiled patterns keep %d bytes, over 1 MiB", after.HeapAlloc-before.HeapAlloc)
	}
}

// BenchmarkCompileTheWorstWatcher measures what admitting worstWatcher
// takes (the webhook and the controller each compile it once per
// generation), and fails over 50 ms: `go test -bench CompileTheWorstWatcher
// ./internal/controller/jobwatcher/policy`.
func BenchmarkCompileTheWorstWatcher(b *testing.B) {
	lists := worstWatcher()
	b.ReportAllocs()
	for b.Loop() {
		if _, errs := CompilePatterns(lists...); len(errs) > 0 {
			b.Fatal(errs)
		}
	}
	if perOp := b.Elapsed() / time.Duration(b.N); perOp > 50*time.Millisecond {
		b.Fatalf("admitting the worst watcher takes %v, over 50 ms", perOp)
	}
}
