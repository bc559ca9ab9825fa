package regexcost

import (
	"regexp/syntax"
	"strings"
	"unicode/utf8"
)

// Character classes cost in runes (two per range), not in instructions:
// `\pL` is one instruction holding 1,318 runes. Case folding costs time
// before anything is held:
// under (?i), syntax.Parse steps through every rune of a bracket range that
// folding can touch, one unicode.SimpleFold each, so `(?i)[B-\x{1e942}]`
// takes 3 ms to parse into two runes, and 169 such ranges fill a 1,020-byte
// pattern that parses in 0.6 s. parseRunes bounds what parsing costs from
// the text, before syntax.Parse runs; heldRunes counts what the compiled
// program holds, from the parse tree, before regexp.Compile runs.
const (
	// unicodeClassRunes is the most runes a Unicode class escape (\p, \P)
	// makes the parser write or step through: its table, its case-folding
	// table, the class it makes (TestUnicodeClassRunesBoundsEveryTable
	// measures every table: `(?i)\P{Ll}` is the costliest, 3,954).
	unicodeClassRunes = 4096
	// groupRunes bounds what a Perl or POSIX class (\d, [:alpha:]) costs:
	// they are ASCII, 128 runes at most, folded or not.
	groupRunes = 128
	// minFold and maxFold are the runes case folding involves, as
	// regexp/syntax has them (TestFoldRunesAreWhereFoldingIs checks them).
	minFold = 0x41
	maxFold = 0x1e943
)

// parseRunes returns an upper bound on the runes syntax.Parse writes or
// steps through building pattern's character classes: unicodeClassRunes
// for each Unicode class escape, groupRunes for each Perl or POSIX class,
// two for each bracket range, and under case folding one for every rune of
// a range that folding can touch. It mirrors how syntax.Parse reads
// brackets and escapes; where the parse would stop at an error it stops
// too, and where it cannot tell it counts more, never less. It stops
// counting once past limit.
func parseRunes(pattern string, limit int) int {
	return scanRunes(pattern, limit, nil)
}

// scanRunes is parseRunes, appending each bracket range it reads (lo, hi)
// to ranges unless ranges is nil.
func scanRunes(pattern string, limit int, ranges *[]rune) int {
	fold := mayFoldCase(pattern)
	n := 0
	for t := pattern; t != "" && n <= limit; {
		switch {
		case strings.HasPrefix(t, `\Q`):
			_, t, _ = strings.Cut(t[2:], `\E`)
		case isUnicodeClass(t):
			n += unicodeClassRunes
			var ok bool
			if t, ok = skipUnicodeClass(t); !ok {
				return n
			}
		case len(t) >= 2 && t[0] == '\\' && strings.IndexByte("dDsSwW", t[1]) >= 0:
			n += groupRunes
			t = t[2:]
		case t[0] == '\\':
			// Any other escape: none holds a bracket or a backslash that
			// the parse would read as one.
			t = t[min(2, len(t)):]
		case t[0] == '[':
			var w int
			var ok bool
			t, w, ok = classRunes(t, fold, ranges)
			n += w
			if !ok {
				return n
			}
		default:
			t = t[1:]
		}
	}
	return n
}

// mayFoldCase reports whether any flag group of pattern ((?i), (?mi:…))
// turns case folding on, wherever it is: folding is counted everywhere if
// anywhere.
func mayFoldCase(pattern string) bool {
	for s := pattern; ; {
		i := strings.Index(s, "(?")
		if i < 0 {
			return false
		}
		s = s[i+2:]
		if flags := s[:len(s)-len(strings.TrimLeft(s, "imsU-"))]; strings.Contains(flags, "i") {
			return true
		}
	}
}

func isUnicodeClass(t string) bool {
	return len(t) >= 2 && t[0] == '\\' && (t[1] == 'p' || t[1] == 'P')
}

// skipUnicodeClass skips `\pL` or `\p{Name}` as syntax.Parse does; it
// reports false where the parse fails.
func skipUnicodeClass(t string) (string, bool) {
	t = t[2:]
	if t == "" {
		return "", false
	}
	if t[0] != '{' {
		_, size := utf8.DecodeRuneInString(t)
		return t[size:], true
	}
	end := strings.IndexByte(t, '}')
	if end < 0 {
		return "", false
	}
	return t[end+1:], true
}

// classRunes counts one bracket expression at the start of s, as
// syntax.Parse's parseClass reads it, and returns what follows it; false
// where the parse fails.
//
//nolint:gocyclo // mirrors syntax.Parse's parseClass case by case, so the two can be read side by side
func classRunes(s string, fold bool, ranges *[]rune) (rest string, n int, ok bool) {
	t := s[1:]
	if t != "" && t[0] == '^' {
		t = t[1:]
		n += 2
	}
	first := true // ] is a rune as the first in the class
	for t == "" || t[0] != ']' || first {
		if t == "" {
			return "", n, false
		}
		first = false
		if len(t) > 2 && t[0] == '[' && t[1] == ':' {
			if i := strings.Index(t[2:], ":]"); i >= 0 {
				t = t[i+4:]
				n += groupRunes
				continue
			}
		}
		if isUnicodeClass(t) {
			n += unicodeClassRunes
			if t, ok = skipUnicodeClass(t); !ok {
				return "", n, false
			}
			continue
		}
		if len(t) >= 2 && t[0] == '\\' && strings.IndexByte("dDsSwW", t[1]) >= 0 {
			t = t[2:]
			n += groupRunes
			continue
		}
		var lo, hi rune
		if lo, t, ok = classChar(t); !ok {
			return "", n, false
		}
		hi = lo
		if len(t) >= 2 && t[0] == '-' && t[1] != ']' {
			if hi, t, ok = classChar(t[1:]); !ok {
				return "", n, false
			}
		}
		n += rangeRunes(lo, hi, fold)
		if ranges != nil {
			*ranges = append(*ranges, lo, hi)
		}
	}
	return t[1:], n, true
}

// rangeRunes is what syntax.Parse spends on the range lo-hi of a class:
// two runes, and under case folding one step for every rune of it that
// folding can touch, unless it holds them all.
func rangeRunes(lo, hi rune, fold bool) int {
	if !fold || lo <= minFold && hi >= maxFold || hi < minFold || lo > maxFold || hi < lo {
		return 2
	}
	return 2 + int(min(hi, maxFold)-max(lo, minFold)) + 1
}

// classChar reads one rune of a class, escaped or not, as syntax.Parse's
// parseClassChar does.
func classChar(t string) (rune, string, bool) {
	if t[0] != '\\' {
		r, size := utf8.DecodeRuneInString(t)
		return r, t[size:], true
	}
	return escapedRune(t)
}

// escapedRune reads the escape at the start of t (`\x{1F600}`, `\101`,
// `\n`, `\.`) as syntax.Parse's parseEscape does, by parsing it alone: an
// escape parses in time bounded by its length.
func escapedRune(t string) (rune, string, bool) {
	end := 2
	switch {
	case len(t) < 2:
		return 0, "", false
	case t[1] == 'x' && len(t) > 2 && t[2] == '{':
		i := strings.IndexByte(t, '}')
		if i < 0 {
			return 0, "", false
		}
		end = i + 1
	case t[1] == 'x':
		end = 4
	case t[1] >= '0' && t[1] <= '7':
		for end < 4 && end < len(t) && t[end] >= '0' && t[end] <= '7' {
			end++
		}
	default:
		_, size := utf8.DecodeRuneInString(t[1:])
		end = 1 + size
	}
	if end > len(t) {
		return 0, "", false
	}
	re, err := syntax.Parse(`[`+t[:end]+`]`, syntax.Perl)
	if err != nil || re.Op != syntax.OpLiteral && re.Op != syntax.OpCharClass || len(re.Rune) == 0 {
		return 0, "", false
	}
	return re.Rune[0], t[end:], true
}

// heldRunes counts the runes re's character classes hold: once each, as the
// compiled program shares a class's runes among the copies a repeat makes
// of it.
func heldRunes(re *syntax.Regexp) int {
	n := 0
	if re.Op == syntax.OpCharClass {
		n = len(re.Rune)
	}
	for _, s := range re.Sub {
		n = sat(n, heldRunes(s))
	}
	return n
}
