package regexcost

import (
	"strings"
	"testing"
)

// TestParseRunesCountsWhatTheParseSpends pins what a pattern's classes
// cost to parse, as the doc of parseRunes gives it: a Unicode class 4,096,
// a Perl or POSIX class 128, a bracket range two runes, and under (?i) one
// more for each rune of the range between minFold and maxFold. A count too
// low admits a pattern that takes too long to parse; one too high refuses
// a pattern the bound should admit.
func TestParseRunesCountsWhatTheParseSpends(t *testing.T) {
	tests := map[string]struct {
		pattern string
		want    int
	}{
		"no class":                        {`abc`, 0},
		"Perl classes":                    {`\d\D\s\S\w\W`, 6 * groupRunes},
		"Unicode class, one letter":       {`\pLx`, unicodeClassRunes},
		"Unicode class, named":            {`\p{Greek}\P{L}`, 2 * unicodeClassRunes},
		"Unicode class the parse refuses": {`\p`, unicodeClassRunes},
		"Unicode class never closed":      {`\p{Greek[a]`, unicodeClassRunes},
		"a range":                         {`[a-c]`, 2},
		"a negated range":                 {`[^a]`, 4},
		"a dash last is a rune":           {`[a-]`, 4},
		"a bracket first is a rune":       {`[]a]`, 4},
		"POSIX class":                     {`[[:alpha:]a]`, groupRunes + 2},
		"not a POSIX class":               {`[[:x][a-f]`, 8},
		"Perl and Unicode classes inside": {`[\d\pL]`, groupRunes + unicodeClassRunes},
		"a class never closed":            {`[a-c`, 2},
		"an empty bracket":                {`[`, 0},
		"quoted":                          {`\Q[a-z]\E[b]`, 2},
		"quoted, never ended":             {`\Q[a-z]`, 0},
		"an escaped bracket":              {`\[a-z]`, 0},
		"a lone backslash":                {`\`, 0},
		"hex escapes":                     {`[\x41-\x43]`, 2},
		"escapes the parse refuses":       {`[\x4]`, 0},
		"folded range":                    {`(?i)[a-c]`, 2 + 3},
		"folded, flags in a group":        {`(?mi:[a-c])`, 2 + 3},
		"other flags do not fold":         {`(?sm)[a-c]`, 2},
		"a group that is no flag":         {`(?P<x>[a-c])`, 2},
		"folded, below minFold":           {`(?i)[0-9@]`, 2 + 2},
		"folded, one rune at minFold":     {`(?i)[A]`, 2 + 1},
		"folded, across minFold":          {`(?i)[0-B]`, 2 + 2},
		"folded, one rune at maxFold":     {`(?i)[\x{1e943}]`, 2 + 1},
		"folded, across maxFold":          {`(?i)[\x{1e940}-\x{1e950}]`, 2 + 4},
		"folded, above maxFold":           {`(?i)[\x{1e944}-\x{1e950}]`, 2},
		"folded, holding all of folding":  {`(?i)[A-\x{1e943}]`, 2},
		"folded, backwards":               {`(?i)[c-a]`, 2},
		"folded, hex escapes":             {`(?i)[\x41-\x43]`, 2 + 3},
		"folded, braced hex escapes":      {`(?i)[\x{41}-\x{43}]`, 2 + 3},
		"folded, octal escapes":           {`(?i)[\101-\103]`, 2 + 3},
		"folded, octal of three digits":   {`(?i)[\1017]`, 2 + 1 + 2},
		"folded, braced hex never closed": {`(?i)[\x{41-z]`, 0},
		"folded, a letter escaped":        {`(?i)[\.a]`, 2 + 2 + 1},
		"Unicode class of no name":        {`\p{}[a-c]`, unicodeClassRunes + 2},
		"Unicode class name read whole":   {`\p{[}a]`, unicodeClassRunes},
		"an empty POSIX class":            {`[[::]]`, groupRunes},
		"Perl class ends the pattern":     {`[\d`, groupRunes},
		"octal escape ends the pattern":   {`[\10`, 2},
		"octal of two digits":             {`[\17]`, 2},
		"escape ends the pattern":         {`[\n`, 2},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := parseRunes(tt.pattern, sizeCap); got != tt.want {
				t.Errorf("parseRunes(%q) = %d, want %d", tt.pattern, got, tt.want)
			}
		})
	}
}

// TestParseRunesStopsPastTheLimit: counting stops once past the limit, not
// at it, so a pattern that costs the limit exactly is counted whole.
func TestParseRunesStopsPastTheLimit(t *testing.T) {
	if got := parseRunes(`\d\d\d`, 2*groupRunes); got != 3*groupRunes {
		t.Errorf("at the limit: counted %d, want %d", got, 3*groupRunes)
	}
	if got := parseRunes(`\d\d\d`, groupRunes-1); got != groupRunes {
		t.Errorf("past the limit: counted %d, want %d", got, groupRunes)
	}
}

// TestOfCountsTheRunesAClassHolds: a negated class holds more runes than it
// takes to parse; Of counts what it holds, classes only, once each.
func TestOfCountsTheRunesAClassHolds(t *testing.T) {
	// [^k] under (?i) holds [\x00-J], [L-j], [l-\u2129], [\u212b-\x{10ffff}]
	// (K, k and the Kelvin sign out): eight runes, parsed in five.
	for pattern, want := range map[string]int{
		`ab(?i)[^k]`:        8,
		`(?:ab(?i)[^k]){3}`: 8,
	} {
		c, err := Of(pattern)
		if err != nil {
			t.Fatal(err)
		}
		if c.Runes != want {
			t.Errorf("Of(%q).Runes = %d, want %d", pattern, c.Runes, want)
		}
	}
}

// TestOfTakesAPatternCostingMaxRunes: the bound is inclusive.
func TestOfTakesAPatternCostingMaxRunes(t *testing.T) {
	c, err := Of(strings.Repeat(`\pL`, MaxRunes/unicodeClassRunes))
	if err != nil || c.Runes != MaxRunes {
		t.Errorf("a pattern costing MaxRunes: %+v, %v", c, err)
	}
}

// TestProgramSizeIsExactWhereTheCompilerIs: for alternations and bounded
// repeats the count is what the compiler emits, not only a bound on it.
func TestProgramSizeIsExactWhereTheCompilerIs(t *testing.T) {
	for _, pat := range []string{"ab|cd|ef", "(?:ab|cd){2}", "x{3}", "(?:xy){2,3}", strings.Repeat("(?:", 3) + "ab|cd" + strings.Repeat(")", 3)} {
		got, err := ProgramSize(pat)
		if err != nil {
			t.Fatal(err)
		}
		if want := compiledSize(t, pat); got != want {
			t.Errorf("%q: counted %d instructions, the compiler emits %d", pat, got, want)
		}
	}
}
