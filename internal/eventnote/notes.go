// Package eventnote formats the human-readable notes of Deckhand's Events.
package eventnote

import (
	"fmt"
	"slices"
	"strings"
)

// Shown is how many names a note about many objects lists.
const Shown = 3

// Names lists the names of the first Shown of objs in order, then says how
// many more there are: "a, b, c and 497 more". An Event about a round of a
// thousand pods stays short and still names some to look at.
func Names[T interface{ GetName() string }](objs []T) string {
	sorted := make([]string, len(objs))
	for i, o := range objs {
		sorted[i] = o.GetName()
	}
	slices.Sort(sorted)
	out := strings.Join(sorted[:min(len(sorted), Shown)], ", ")
	if more := len(sorted) - Shown; more > 0 {
		out += fmt.Sprintf(" and %d more", more)
	}
	return out
}

// First returns the object of objs whose name sorts first: the one Names
// lists first. An Event about a round of objects names it as the related
// object, so that each round is an Event of its own: Events that differ
// only in their note are merged into one series that keeps the first
// round's note, and the second "Created 50 pods" would show as the first
// one's count going to 2.
func First[T interface{ GetName() string }](objs []T) T {
	return slices.MinFunc(objs, func(a, b T) int { return strings.Compare(a.GetName(), b.GetName()) })
}

// Count says "1 pod" or "n pods".
func Count(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// List joins a few words as a sentence does: "a", "a and b", "a, b and c".
func List(words []string) string {
	if len(words) <= 1 {
		return strings.Join(words, "")
	}
	return strings.Join(words[:len(words)-1], ", ") + " and " + words[len(words)-1]
}
