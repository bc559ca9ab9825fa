// Package policy holds the rules of JobWatchers and ClusterJobWatchers that
// their admission webhook and the controller both apply: how a watcher's
// patterns compile, and what one may cost. A pattern admitted is a pattern
// the controller can use; with webhooks off, the controller refuses the same.
package policy

import (
	"fmt"
	"regexp"
	"strings"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/regexcost"
)

// Bounds on what a watcher's patterns may cost once compiled. A pattern's
// length says little about its compiled size: a repeat count multiplies
// what it repeats, so the 1,023-byte `(?:a…a){1000}` compiles to a million
// instructions (hundreds of MB while compiling). Go's RE2 compiles about
// 100 bytes per instruction, and keeps about as much per instruction. A
// character class is one instruction but holds its runes, copied for every
// repeat of it, and case folding makes parsing a class cost time: those are
// bounded in runes (internal/regexcost).
const (
	// MaxPatternProgram bounds one pattern's compiled program, in RE2
	// instructions (regexcost.MaxProgram).
	MaxPatternProgram = regexcost.MaxProgram
	// MaxWatcherProgram bounds the sum over all of one watcher's patterns
	// (all four lists), so that one object costs the manager at most about
	// 1 MB of compiled patterns.
	MaxWatcherProgram = 8192
	// MaxPatternRunes bounds the runes one pattern's character classes hold,
	// or take to parse (regexcost.MaxRunes). Names of Kubernetes objects are
	// ASCII (DNS labels), so a class larger than `[a-z0-9.-]` matches
	// nothing it does not.
	MaxPatternRunes = regexcost.MaxRunes
	// MaxWatcherRunes bounds the same over all of one watcher's patterns.
	MaxWatcherRunes = 32768
)

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
	cost, err := regexcost.Check(pattern, limit)
	if err != nil {
		return nil, cost, err
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

// Cost is what one pattern costs compiled.
type Cost = regexcost.Cost

// PatternCost returns what pattern costs compiled, without compiling it
// (regexcost.Of).
func PatternCost(pattern string) (Cost, error) { return regexcost.Of(pattern) }

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
