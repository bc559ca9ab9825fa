// Package regexcost says what an RE2 pattern written by a tenant costs the
// manager once compiled, in instructions and in the runes its character
// classes hold or take to parse, without compiling it, so that a costly
// pattern is refused for no more than reading it. JobWatchers' name
// patterns and PodBuggers' redaction patterns are bounded with it.
package regexcost

import (
	"fmt"
	"regexp/syntax"
)

// Bounds of one pattern: twice what the longest pattern the schemas admit
// (1,024 bytes) compiles to without repeat counts, and 64 KB of runes (0.3
// ms): room for four Unicode classes (each counted as the costliest,
// 4,096), or ranges folded by (?i) 16,000 runes wide.
const (
	MaxProgram = 2048
	MaxRunes   = 16384
)

// Cost is what one pattern costs compiled.
type Cost struct {
	// Program is the number of instructions of its compiled program.
	Program int
	// Runes is the number of runes its character classes hold (a class
	// once, however often a repeat copies it: the copies share them), or
	// take to parse (Unicode tables, ranges under case folding), whichever
	// is more.
	Runes int
}

// Check says whether pattern costs at most limit (and the bounds of one
// pattern), before it is compiled: a pattern whose classes would take more
// than that to parse is refused before it is parsed. It returns what the
// pattern costs (as far as it was counted); a pattern RE2 refuses gives
// RE2's error.
func Check(pattern string, limit Cost) (Cost, error) {
	limit = Cost{Program: min(limit.Program, MaxProgram), Runes: min(limit.Runes, MaxRunes)}
	if n := parseRunes(pattern, limit.Runes); n > limit.Runes {
		return Cost{Runes: n}, runesError(limit.Runes, n)
	}
	cost, err := parsePattern(pattern)
	if err != nil {
		return cost, err
	}
	if cost.Program > limit.Program {
		return cost, programError(limit.Program, cost.Program)
	}
	if cost.Runes > limit.Runes {
		return cost, runesError(limit.Runes, cost.Runes)
	}
	return cost, nil
}

func programError(limit, n int) error {
	return fmt.Errorf("compiles to more than %d instructions (about %d): a repeat count multiplies the size of what it repeats", limit, n)
}

func runesError(limit, n int) error {
	return fmt.Errorf("its character classes cost more than %d runes (at least %d): a Unicode class (\\p) counts 4,096, and under (?i) a range costs every rune in it", limit, n)
}

// ProgramSize parses an RE2 pattern and returns how many
// instructions its compiled program has (an upper bound, counted from the
// parse tree as Go's compiler expands it, repeats included), without
// expanding or compiling anything. A pattern RE2 refuses gives its error.
// It parses whatever the pattern's classes cost to parse: PatternCost
// refuses what costs too much first.
func ProgramSize(pattern string) (int, error) {
	c, err := parsePattern(pattern)
	return c.Program, err
}

// Of returns what pattern costs compiled, without compiling it; a
// pattern whose classes would take more than MaxRunes to parse is
// not parsed, and its error says so.
func Of(pattern string) (Cost, error) {
	if n := parseRunes(pattern, MaxRunes); n > MaxRunes {
		return Cost{Runes: n}, runesError(MaxRunes, n)
	}
	c, err := parsePattern(pattern)
	return c, err
}

func parsePattern(pattern string) (Cost, error) {
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return Cost{}, err
	}
	// The program's fail and match instructions, and the anchors
	// CompilePattern adds.
	return Cost{
		Program: sat(programSize(tree), 4),
		Runes:   max(parseRunes(pattern, sizeCap), heldRunes(tree)),
	}, nil
}

// saturation: sizes stop growing here, far above every bound.
const sizeCap = 1 << 30

func sat(a, b int) int { return min(a+b, sizeCap) }

func mul(a, b int) int {
	if a != 0 && b > sizeCap/a {
		return sizeCap
	}
	return min(a*b, sizeCap)
}

// programSize counts re's instructions as regexp/syntax compiles it after
// Simplify: x{n,m} is n copies of x and m-n nested optional copies.
func programSize(re *syntax.Regexp) int {
	sub := func() int { return programSize(re.Sub[0]) }
	switch re.Op {
	case syntax.OpNoMatch:
		return 0
	case syntax.OpLiteral:
		return max(len(re.Rune), 1)
	case syntax.OpCapture:
		return sat(sub(), 2)
	case syntax.OpStar:
		return sat(sub(), 2) // a nullable x* compiles as (x+)?
	case syntax.OpPlus, syntax.OpQuest:
		return sat(sub(), 1)
	case syntax.OpConcat, syntax.OpAlternate:
		n := 0
		for _, s := range re.Sub {
			n = sat(n, programSize(s))
		}
		if re.Op == syntax.OpAlternate {
			n = sat(n, len(re.Sub)-1)
		}
		return max(n, 1)
	case syntax.OpRepeat:
		s := sub()
		switch {
		case re.Max == -1 && re.Min == 0:
			return sat(s, 2)
		case re.Max == -1:
			return sat(mul(re.Min, s), 1)
		case re.Max == 0:
			return 1
		}
		return sat(mul(re.Min, s), mul(re.Max-re.Min, sat(s, 1)))
	}
	// Empty match, character classes, any character, anchors, word
	// boundaries: one instruction each.
	return 1
}
