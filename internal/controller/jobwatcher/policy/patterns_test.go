package policy

import (
	"regexp"
	"regexp/syntax"
	"runtime"
	"strings"
	"testing"
)

// compiledSize is the number of instructions Go's compiler really emits for
// the pattern as CompilePattern anchors it.
func compiledSize(t testing.TB, pattern string) int {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		t.Fatalf("parse %q: %v", pattern, err)
	}
	re = &syntax.Regexp{Op: syntax.OpConcat, Sub: []*syntax.Regexp{{Op: syntax.OpBeginText}, re, {Op: syntax.OpEndText}}}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		t.Fatalf("compile %q: %v", pattern, err)
	}
	return len(prog.Inst)
}

// TestPatternProgramSizeBoundsTheCompiledProgram checks that the size counted
// from the parse tree is never below what the compiler emits, and not far
// above it, so the bound refuses what it says and nothing much smaller.
func TestPatternProgramSizeBoundsTheCompiledProgram(t *testing.T) {
	for _, pat := range []string{
		"", "a", "pi-.*", "team-[0-9]+", "(?i)team-(a|b|c)", strings.Repeat("a", 1000),
		"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "(?:ab){3,}", "(a*)*", "(a|)+", "x{0}", "x{2,5}",
		"(?:(?:a{10}){10}){10}", "(?:[a-z]{1,9}\\.){1,4}[a-z]+", `\bfoo\b|^bar$`, "[^x]*?y",
		"(?:" + strings.Repeat("a", 20) + "){50}",
	} {
		got, err := PatternProgramSize(pat)
		if err != nil {
			t.Fatalf("%q: %v", pat, err)
		}
		want := compiledSize(t, pat)
		if got < want || got > 2*want+8 {
			t.Errorf("%q: counted %d instructions, the compiler emits %d", pat, got, want)
		}
	}
}

// FuzzPatternProgramSize checks on any pattern RE2 accepts that the count is
// never below the compiled size (only small programs are compiled here).
func FuzzPatternProgramSize(f *testing.F) {
	for _, s := range []string{"pi-.*", "(a{3}){4}", "(?i)x+y?z*", "(|a)*", "[a-c]{2,}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		got, err := PatternProgramSize(pattern)
		if err != nil || got > 20000 {
			return
		}
		if want := compiledSize(t, pattern); got < want {
			t.Fatalf("%q: counted %d instructions, the compiler emits %d", pattern, got, want)
		}
	})
}

// bomb is the pattern: 1,023 bytes that compile to a million
// instructions.
var bomb = "(?:" + strings.Repeat("a", 1013) + "){1000}"

// TestCompilePatternRefusesARegexBombWithoutCompilingIt checks that the bomb
// is refused, saying why, and that refusing it allocates no more than
// parsing it does: well under a megabyte, where compiling it takes hundreds.
func TestCompilePatternRefusesARegexBombWithoutCompilingIt(t *testing.T) {
	if len(bomb) != 1023 {
		t.Fatalf("bomb is %d bytes", len(bomb))
	}
	_, err := CompilePattern(bomb)
	if err == nil || !strings.Contains(err.Error(), "compiles to more than 2048 instructions") {
		t.Fatalf("bomb: %v", err)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for range 10 {
		if _, err := CompilePattern(bomb); err == nil {
			t.Fatal("bomb compiled")
		}
	}
	runtime.ReadMemStats(&after)
	if perCall := (after.TotalAlloc - before.TotalAlloc) / 10; perCall > 1<<20 {
		t.Fatalf("refusing the bomb allocated %d bytes per call", perCall)
	}
	if allocs := testing.AllocsPerRun(5, func() { _, _ = CompilePattern(bomb) }); allocs > 200 {
		t.Fatalf("refusing the bomb made %v allocations", allocs)
	}
}

func TestCompilePatterns(t *testing.T) {
	long := strings.Repeat("a", 1000) // about 1,000 instructions each
	tests := map[string]struct {
		lists []PatternList
		want  []string
	}{
		"valid": {lists: []PatternList{{Field: "jobNamePatterns", Patterns: []string{"pi-.*", "x"}}}},
		"syntax error and bomb, each named": {
			lists: []PatternList{
				{Field: "jobNamePatterns", Patterns: []string{"ok", "([a-z"}},
				{Field: "namespacePatterns", Patterns: []string{bomb}},
			},
			want: []string{
				"spec.jobNamePatterns[1]: error parsing regexp: missing closing ]: `[a-z`",
				"spec.namespacePatterns[0]: compiles to more than 2048 instructions (about 1013",
			},
		},
		"the patterns that take the watcher past its bound": {
			lists: []PatternList{
				{Field: "jobNamePatterns", Patterns: []string{long, long, long, long, long, long, long, long}},
				{Field: "excludeJobNamePatterns", Patterns: []string{long, long, "small"}},
			},
			want: []string{
				"spec.excludeJobNamePatterns[0]: with the patterns before it, the watcher's patterns compile to more than 8192 instructions",
				"spec.excludeJobNamePatterns[1]: with the patterns before it",
			},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			res, errs := CompilePatterns(tt.lists...)
			if len(errs) != len(tt.want) {
				t.Fatalf("errors %v, want %d", errs, len(tt.want))
			}
			for i, e := range errs {
				if !strings.HasPrefix(e.Error(), tt.want[i]) {
					t.Errorf("error %d = %q, want prefix %q", i, e.Error(), tt.want[i])
				}
			}
			for l, list := range tt.lists {
				bad := 0
				for _, e := range errs {
					if e.Field == list.Field {
						bad++
					}
				}
				if len(res[l]) != len(list.Patterns)-bad {
					t.Errorf("%s: %d compiled, want %d", list.Field, len(res[l]), len(list.Patterns)-bad)
				}
			}
		})
	}
}

// FuzzCompilePatternMatchesWholeNames checks that a compiled pattern matches
// exactly the names the pattern as written matches whole: the leftmost
// longest match of the unanchored pattern spans the name.
func FuzzCompilePatternMatchesWholeNames(f *testing.F) {
	for _, s := range [][2]string{{"pi-.*", "pi-1"}, {`\Qa.b`, "a.b"}, {"a|ab", "ab"}, {"x)|(.*", "y"}, {"(?i)b", "B"},
		{`\Qa\`, `a\`}, {"[a-b]*[c-d]*", "abcd"}, {`\pL\pL\pL\pL\pL`, "abcde"}, {"(?i)[k]", "\u212a"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, name string) {
		re, err := CompilePattern(pattern)
		cost, costErr := PatternCost(pattern)
		if costErr != nil {
			return // refused before parsing: regexp.Compile may cost seconds
		}
		plain, plainErr := regexp.Compile(pattern)
		if plainErr == nil && cost.Program <= MaxPatternProgram && cost.Runes <= MaxPatternRunes && err != nil {
			t.Fatalf("%q: refused: %v", pattern, err)
		}
		if err != nil {
			return
		}
		plain.Longest()
		loc := plain.FindStringIndex(name)
		whole := loc != nil && loc[0] == 0 && loc[1] == len(name)
		if re.MatchString(name) != whole {
			t.Fatalf("%q on %q: compiled matches %v, pattern matches whole %v", pattern, name, re.MatchString(name), whole)
		}
	})
}
