// Package policy holds the rules of JobWatchers and ClusterJobWatchers that
// their admission webhook and the controller both apply: how a watcher's
// patterns compile, and what one may cost. A pattern admitted is a pattern
// the controller can use; with webhooks off, the controller refuses the same.
package policy

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"strings"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// Bounds on what a watcher's patterns may cost once compiled. A pattern's
// length says little about its compiled size: a repeat count multiplies
// what it repeats, so the 1,023-byte `(?:a…a){1000}` compiles to a million
// instructions (hundreds of MB while compiling). Go's RE2 compiles about
// 100 bytes per instruction, and keeps about as much per instruction. A
// character class is one instruction but holds its runes, copied for every
// repeat of it, and case folding makes parsing a class cost time: those are
// bounded in runes (classes.go).
const (
	// MaxPatternProgram bounds one pattern's compiled program, in RE2
	// instructions: twice what the longest pattern the schema admits (1,024
	// bytes) compiles to without repeat counts.
	MaxPatternProgram = 2048
	// MaxWatcherProgram bounds the sum over all of one watcher's patterns
	// (all four lists), so that one object costs the manager at most about
	// 1 MB of compiled patterns.
	MaxWatcherProgram = 8192
	// MaxPatternRunes bounds the runes one pattern's character classes hold,
	// or take to parse, whichever is more (64 KB of runes, 0.3 ms): room for
	// four Unicode classes (each counted as the costliest, 4,096), or ranges
	// folded by (?i) 16,000 runes wide. Names of Kubernetes objects are
	// ASCII (DNS labels), so a class larger than `[a-z0-9.-]` matches
	// nothing it does not.
	MaxPatternRunes = 16384
	// MaxWatcherRunes bounds the same over all of one watcher's patterns.
	MaxWatcherRunes = 32768
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

// CompilePattern compiles one of a watcher's RE2 patterns (jobNamePatterns,
// namespacePatterns and their exclusions) as it is matched: against the
// whole name, so "team-.*" matches "team-a" but not "my-team-a". The
// admission webhook and the controller both call it (through
// CompilePatterns), so a pattern admitted is a pattern the controller can
// use. A bad pattern's error is the RE2 compiler's message for the pattern as
// written. A pattern that would cost more than MaxPatternProgram
// instructions or MaxPatternRunes runes is refused before it is compiled,
// and one whose classes would take longer than that to parse before it is
// parsed, so refusing it costs no more than reading it.
func CompilePattern(pattern string) (*regexp.Regexp, error) {
	re, _, err := compilePattern(pattern, Cost{Program: MaxPatternProgram, Runes: MaxPatternRunes})
	return re, err
}

// compilePattern compiles pattern if it costs at most limit (and the
// per-pattern bounds).
func compilePattern(pattern string, limit Cost) (*regexp.Regexp, Cost, error) {
	limit = Cost{Program: min(limit.Program, MaxPatternProgram), Runes: min(limit.Runes, MaxPatternRunes)}
	if n := parseRunes(pattern, limit.Runes); n > limit.Runes {
		return nil, Cost{Runes: n}, runesError(limit.Runes, n)
	}
	cost, err := parsePattern(pattern)
	if err != nil {
		return nil, cost, err
	}
	if cost.Program > limit.Program {
		return nil, cost, programError(limit.Program, cost.Program)
	}
	if cost.Runes > limit.Runes {
		return nil, cost, runesError(limit.Runes, cost.Runes)
	}
	// Anchored around the pattern as written, not the parse tree's String,
	// which spells every class out (`\pL` is 4 KB of text, slower to print
	// under (?i) than to parse). A `\Q` without `\E` would quote the
	// closing anchors, which leaves the group unclosed: the anchors then go
	// after an `\E`. The optional second `$` changes no match; it keeps Go
	// from building a one-pass matcher, whose construction grows with the
	// cube of a pattern's optional parts (`[a-b]*[c-d]*…`, 128 of them: 14 MB
	// and 8 ms to compile, 60 KB and 0.05 ms without), and which names of at
	// most 253 bytes do not need.
	re, err := regexp.Compile(`^(?:` + pattern + `)$$?`)
	if err != nil && strings.Contains(pattern, `\Q`) {
		re, err = regexp.Compile(`^(?:` + pattern + `\E)$$?`)
	}
	return re, cost, err
}

func programError(limit, n int) error {
	return fmt.Errorf("compiles to more than %d instructions (about %d): a repeat count multiplies the size of what it repeats", limit, n)
}

func runesError(limit, n int) error {
	return fmt.Errorf("its character classes cost more than %d runes (at least %d): a Unicode class (\\p) counts 4,096, and under (?i) a range costs every rune in it", limit, n)
}

// PatternProgramSize parses an RE2 pattern and returns how many
// instructions its compiled program has (an upper bound, counted from the
// parse tree as Go's compiler expands it, repeats included), without
// expanding or compiling anything. A pattern RE2 refuses gives its error.
// It parses whatever the pattern's classes cost to parse: PatternCost
// refuses what costs too much first.
func PatternProgramSize(pattern string) (int, error) {
	c, err := parsePattern(pattern)
	return c.Program, err
}

// PatternCost returns what pattern costs compiled, without compiling it; a
// pattern whose classes would take more than MaxPatternRunes to parse is
// not parsed, and its error says so.
func PatternCost(pattern string) (Cost, error) {
	if n := parseRunes(pattern, MaxPatternRunes); n > MaxPatternRunes {
		return Cost{Runes: n}, runesError(MaxPatternRunes, n)
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

// PatternList is one of a watcher's pattern lists and the field that holds
// it, as "jobNamePatterns".
// +kubebuilder:object:generate=false
type PatternList struct {
	Field    string
	Patterns []string
}

// PatternError is why one pattern of a watcher cannot be used.
// +kubebuilder:object:generate=false
type PatternError struct {
	// Field and Index name the pattern: spec.<Field>[<Index>].
	Field   string
	Index   int
	Pattern string
	Err     error
}

func (e PatternError) Error() string {
	return fmt.Sprintf("spec.%s[%d]: %v", e.Field, e.Index, e.Err)
}

func (e PatternError) Unwrap() error { return e.Err }

// CompilePatterns compiles every pattern of one watcher's lists, in order,
// with CompilePattern, and refuses each pattern that would take their total
// cost past MaxWatcherProgram instructions or MaxWatcherRunes runes (before
// parsing or compiling it). It returns the compiled patterns of each list
// (the refused ones left out) and one error per refused pattern. The webhook
// and the controller both call it.
func CompilePatterns(lists ...PatternList) ([][]*regexp.Regexp, []PatternError) {
	out := make([][]*regexp.Regexp, len(lists))
	var errs []PatternError
	var total Cost
	for l, list := range lists {
		out[l] = make([]*regexp.Regexp, 0, len(list.Patterns))
		for i, pat := range list.Patterns {
			left := Cost{Program: MaxWatcherProgram - total.Program, Runes: MaxWatcherRunes - total.Runes}
			re, c, err := compilePattern(pat, left)
			switch {
			case err == nil:
			case c.Program <= MaxPatternProgram && c.Program > left.Program:
				err = fmt.Errorf("with the patterns before it, the watcher's patterns compile to more than %d instructions", MaxWatcherProgram)
			case c.Runes <= MaxPatternRunes && c.Runes > left.Runes:
				err = fmt.Errorf("with the patterns before it, the watcher's character classes cost more than %d runes", MaxWatcherRunes)
			}
			if err != nil {
				errs = append(errs, PatternError{Field: list.Field, Index: i, Pattern: pat, Err: err})
				continue
			}
			total.Program += c.Program
			total.Runes += c.Runes
			out[l] = append(out[l], re)
		}
	}
	return out, errs
}

// WatcherPatterns lists a watcher's pattern lists in the order the webhook
// and the controller compile them: a JobWatcher's or ClusterJobWatcher's
// job name patterns, then a ClusterJobWatcher's namespace patterns.
func WatcherPatterns(p *deckhandbatchv1.JobPolicy, namespaces, excludeNamespaces []string) []PatternList {
	return []PatternList{
		{Field: "jobNamePatterns", Patterns: p.JobNamePatterns},
		{Field: "excludeJobNamePatterns", Patterns: p.ExcludeJobNamePatterns},
		{Field: "namespacePatterns", Patterns: namespaces},
		{Field: "excludeNamespacePatterns", Patterns: excludeNamespaces},
	}
}
