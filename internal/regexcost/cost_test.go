package regexcost

import (
	"regexp/syntax"
	"strings"
	"testing"
	"unicode"
)

// tableRunes is what appending a Unicode table to a class writes: two runes
// a range, and a range with a stride one element at a time.
func tableRunes(tab *unicode.RangeTable) int {
	if tab == nil {
		return 0
	}
	n := 0
	for _, r := range tab.R16 {
		if r.Stride == 1 {
			n += 2
		} else {
			n += 2 * int((r.Hi-r.Lo)/r.Stride+1)
		}
	}
	for _, r := range tab.R32 {
		if r.Stride == 1 {
			n += 2
		} else {
			n += 2 * int((r.Hi-r.Lo)/r.Stride+1)
		}
	}
	return n
}

// TestUnicodeClassRunesBoundsEveryTable measures what each Unicode class
// escape costs the parser, its table and its case-folding table, against
// the bound parseRunes counts for it.
func TestUnicodeClassRunesBoundsEveryTable(t *testing.T) {
	largest, name := 0, ""
	check := func(n string, tab, fold *unicode.RangeTable) {
		for _, pre := range []string{`\p`, `\P`, `(?i)\p`, `(?i)\P`} {
			re, err := syntax.Parse(pre+"{"+n+"}", syntax.Perl)
			if err != nil {
				continue // a name the parser spells otherwise
			}
			if cost := len(re.Rune) + tableRunes(tab) + tableRunes(fold); cost > largest {
				largest, name = cost, pre+"{"+n+"}"
			}
		}
	}
	for n, tab := range unicode.Categories {
		check(n, tab, unicode.FoldCategory[n])
	}
	for n, tab := range unicode.Scripts {
		check(n, tab, unicode.FoldScript[n])
	}
	for _, n := range []string{"Any", "Assigned", "ASCII"} {
		check(n, unicode.Cn, nil)
	}
	t.Logf("the costliest Unicode class: %s, %d runes", name, largest)
	if largest > unicodeClassRunes {
		t.Fatalf("%s costs %d runes to parse, unicodeClassRunes is %d", name, largest, unicodeClassRunes)
	}
}

// TestFoldRunesAreWhereFoldingIs checks minFold and maxFold against this
// Go's Unicode tables: parseRunes counts folding work only between them.
func TestFoldRunesAreWhereFoldingIs(t *testing.T) {
	if unicode.SimpleFold(minFold) == minFold || unicode.SimpleFold(maxFold) == maxFold {
		t.Fatal("minFold or maxFold does not fold")
	}
	for r := rune(0); r <= unicode.MaxRune; r++ {
		if (r < minFold || r > maxFold) && unicode.SimpleFold(r) != r {
			t.Fatalf("%U folds, outside [minFold, maxFold]", r)
		}
	}
}

// compiledSize is the number of instructions Go's compiler really emits for
// the pattern anchored.
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

// TestProgramSizeBoundsTheCompiledProgram checks that the size counted
// from the parse tree is never below what the compiler emits, and not far
// above it, so the bound refuses what it says and nothing much smaller.
func TestProgramSizeBoundsTheCompiledProgram(t *testing.T) {
	for _, pat := range []string{
		"", "a", "pi-.*", "team-[0-9]+", "(?i)team-(a|b|c)", strings.Repeat("a", 1000),
		"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", "(?:ab){3,}", "(a*)*", "(a|)+", "x{0}", "x{2,5}",
		"(?:(?:a{10}){10}){10}", "(?:[a-z]{1,9}\\.){1,4}[a-z]+", `\bfoo\b|^bar$`, "[^x]*?y",
		"(?:" + strings.Repeat("a", 20) + "){50}",
	} {
		got, err := ProgramSize(pat)
		if err != nil {
			t.Fatalf("%q: %v", pat, err)
		}
		want := compiledSize(t, pat)
		if got < want || got > 2*want+8 {
			t.Errorf("%q: counted %d instructions, the compiler emits %d", pat, got, want)
		}
	}
}

// FuzzProgramSize checks on any pattern RE2 accepts that the count is
// never below the compiled size (only small programs are compiled here).
func FuzzProgramSize(f *testing.F) {
	for _, s := range []string{"pi-.*", "(a{3}){4}", "(?i)x+y?z*", "(|a)*", "[a-c]{2,}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		got, err := ProgramSize(pattern)
		if err != nil || got > 20000 {
			return
		}
		if want := compiledSize(t, pattern); got < want {
			t.Fatalf("%q: counted %d instructions, the compiler emits %d", pattern, got, want)
		}
	})
}

// FuzzParseRunesReadsEveryRange checks that parseRunes reads brackets as
// syntax.Parse does: every rune of every bracket class the parse makes is in
// a range parseRunes read (so no range escapes its folding count), for
// patterns whose classes come from brackets only.
func FuzzParseRunesReadsEveryRange(f *testing.F) {
	for _, s := range []string{`[a-z]`, `[]a]`, `[\]-\x{100}]x[^b]`, `\Q[\E[c-d]`, `[[:x][a-f]`, `[\x41-\x5a\101]`, `[-a-]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, pattern string) {
		if strings.ContainsAny(pattern, "|^.") || strings.Contains(pattern, "[:") || strings.Contains(pattern, "(?") {
			return // classes made of alternated literals, negations, named or folded classes
		}
		for _, esc := range []string{`\p`, `\P`, `\d`, `\D`, `\s`, `\S`, `\w`, `\W`} {
			if strings.Contains(pattern, esc) {
				return
			}
		}
		tree, err := syntax.Parse(pattern, syntax.Perl)
		if err != nil {
			return
		}
		var ranges []rune
		scanRunes(pattern, sizeCap, &ranges)
		read := func(r rune) bool {
			for i := 0; i < len(ranges); i += 2 {
				if ranges[i] <= r && r <= ranges[i+1] {
					return true
				}
			}
			return false
		}
		var walk func(re *syntax.Regexp)
		walk = func(re *syntax.Regexp) {
			if re.Op == syntax.OpCharClass {
				for i := 0; i < len(re.Rune); i += 2 {
					for _, r := range []rune{re.Rune[i], re.Rune[i+1]} {
						if !read(r) {
							t.Fatalf("%q: the class %v holds %U, which parseRunes never read (it read %v)", pattern, re, r, ranges)
						}
					}
				}
			}
			for _, s := range re.Sub {
				walk(s)
			}
		}
		walk(tree)
	})
}
