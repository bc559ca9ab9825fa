package policy

import (
	"fmt"
	"regexp"

	"k8s.io/apimachinery/pkg/util/validation/field"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/regexcost"
)

// Bounds of one PodBugger's redaction patterns together (each is bounded by
// regexcost's per-pattern bounds): the manager holds them compiled for as
// long as the PodBugger exists, and runs them over every log tail and
// message it records.
const (
	MaxRedactProgram = 4096
	MaxRedactRunes   = regexcost.MaxRunes
)

// RedactPatterns compiles pb's spec.incidents.redact, unanchored (a match
// anywhere in a line is removed), refusing each pattern that would take the
// PodBugger's patterns past MaxRedactProgram instructions or MaxRedactRunes
// runes before it is compiled. The webhook and the recorder both call it;
// each error names its pattern's field.
func RedactPatterns(pb *debugv1beta1.PodBugger) ([]*regexp.Regexp, field.ErrorList) {
	if pb.Spec.Incidents == nil {
		return nil, nil
	}
	path := field.NewPath("spec", "incidents", "redact")
	var (
		out   []*regexp.Regexp
		errs  field.ErrorList
		total regexcost.Cost
	)
	for i, pat := range pb.Spec.Incidents.Redact {
		left := regexcost.Cost{Program: MaxRedactProgram - total.Program, Runes: MaxRedactRunes - total.Runes}
		c, err := regexcost.Check(pat, left)
		switch {
		case err == nil:
		case c.Program <= regexcost.MaxProgram && c.Program > left.Program:
			err = fmt.Errorf("with the patterns before it, the PodBugger's redaction patterns compile to more than %d instructions", MaxRedactProgram)
		case c.Runes <= regexcost.MaxRunes && c.Runes > left.Runes:
			err = fmt.Errorf("with the patterns before it, the PodBugger's character classes cost more than %d runes", MaxRedactRunes)
		}
		var re *regexp.Regexp
		if err == nil {
			re, err = regexp.Compile(pat)
		}
		if err != nil {
			errs = append(errs, field.Invalid(path.Index(i), pat, err.Error()))
			continue
		}
		total.Program += c.Program
		total.Runes += c.Runes
		out = append(out, re)
	}
	return out, errs
}
