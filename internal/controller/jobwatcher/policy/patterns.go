// Package policy holds the rules of JobWatchers and ClusterJobWatchers that
// their admission webhook and the controller both apply: how a watcher's
// patterns compile, and what one may cost. A pattern admitted is a pattern
// the controller can use; with webhooks off, the controller refuses the same.
package policy

import (
	"fmt"
	"regexp"
	"regexp/syntax"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

// Bounds on what a watcher's patterns may cost once compiled. A pattern's
// length says little about its compiled size: a repeat count multiplies
// what it repeats, so the 1,023-byte `(?:a…a){1000}` compiles to a million
// instructions (hundreds of MB while compiling). Go's RE2 compiles about
// 100 bytes per instruction, and keeps about as much per instruction.
const (
	// MaxPatternProgram bounds one pattern's compiled program, in RE2
	// instructions: twice what the longest pattern the schema admits (1,024
	// bytes) compiles to without repeat counts.
	MaxPatternProgram = 2048
	// MaxWatcherProgram bounds the sum over all of one watcher's patterns
	// (all four lists), so that one object costs the manager at most about
	// 1 MB of compiled patterns.
	MaxWatcherProgram = 8192
)

// CompilePattern compiles one of a watcher's RE2 patterns (jobNamePatterns,
// namespacePatterns and their exclusions) as it is matched: against the
// whole name, so "team-.*" matches "team-a" but not "my-team-a". The
// admission webhook and the controller both call it (through
// CompilePatterns), so a pattern admitted is a pattern the controller can
// use. A bad pattern's error is the RE2 compiler's message for the pattern as
// written. A pattern whose program would exceed MaxPatternProgram
// instructions is refused before anything is compiled, so refusing it costs
// no more than parsing it.
func CompilePattern(pattern string) (*regexp.Regexp, error) {
	re, _, err := compilePattern(pattern)
	return re, err
}

func compilePattern(pattern string) (*regexp.Regexp, int, error) {
	tree, n, err := parsePattern(pattern)
	if err != nil {
		return nil, 0, err
	}
	if n > MaxPatternProgram {
		return nil, n, fmt.Errorf("compiles to more than %d instructions (about %d): a repeat count multiplies the size of what it repeats", MaxPatternProgram, n)
	}
	// Anchored around the parsed pattern, not its text: a `\Q` without
	// `\E` would quote the closing anchor too.
	re, err := regexp.Compile(`^(?:` + tree.String() + `)$`)
	return re, n, err
}

// PatternProgramSize parses an RE2 pattern and returns how many
// instructions its compiled program has (an upper bound, counted from the
// parse tree as Go's compiler expands it, repeats included), without
// expanding or compiling anything. A pattern RE2 refuses gives its error.
func PatternProgramSize(pattern string) (int, error) {
	_, n, err := parsePattern(pattern)
	return n, err
}

func parsePattern(pattern string) (*syntax.Regexp, int, error) {
	tree, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, 0, err
	}
	// The program's fail and match instructions, and the anchors
	// CompilePattern adds.
	return tree, sat(programSize(tree), 4), nil
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
// with CompilePattern, and refuses each pattern that would take their
// programs' total past MaxWatcherProgram instructions. It returns the
// compiled patterns of each list (the refused ones left out) and one error
// per refused pattern. The webhook and the controller both call it.
func CompilePatterns(lists ...PatternList) ([][]*regexp.Regexp, []PatternError) {
	out := make([][]*regexp.Regexp, len(lists))
	var errs []PatternError
	total := 0
	for l, list := range lists {
		out[l] = make([]*regexp.Regexp, 0, len(list.Patterns))
		for i, pat := range list.Patterns {
			re, n, err := compilePattern(pat)
			if err == nil && total+n > MaxWatcherProgram {
				err = fmt.Errorf("with the patterns before it, the watcher's patterns compile to more than %d instructions", MaxWatcherProgram)
			}
			if err != nil {
				errs = append(errs, PatternError{Field: list.Field, Index: i, Pattern: pat, Err: err})
				continue
			}
			total += n
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
