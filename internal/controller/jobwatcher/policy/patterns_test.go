package policy

import (
	"regexp"
	"runtime"
	"strings"
	"testing"
)

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
		"the patterns whose classes take the watcher past its bound": {
			lists: []PatternList{
				// 12,288 runes each: the third takes the watcher past 32,768.
				{Field: "jobNamePatterns", Patterns: []string{`\pL\pL\pL`, `\pN\pN\pN`, `\pP\pP\pP`, "[a-c]"}},
			},
			want: []string{
				"spec.jobNamePatterns[2]: with the patterns before it, the watcher's character classes cost more than 32768 runes",
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
