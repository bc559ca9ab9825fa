// Package textdiff lists how two texts differ line by line, for tests'
// failure messages and checks of what a change touched (the installs'
// golden files, the scaffolder's proof that a new kind changes only its
// own rights).
package textdiff

import (
	"slices"
	"strings"
)

// Lines are the lines of want that got does not have ("- " and the line),
// then those of got that want does not have ("+ " and the line). Order and
// repeats do not count: a line moved is no difference.
func Lines(want, got string) []string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var out []string
	for _, l := range w {
		if !slices.Contains(g, l) {
			out = append(out, "- "+l)
		}
	}
	for _, l := range g {
		if !slices.Contains(w, l) {
			out = append(out, "+ "+l)
		}
	}
	return out
}
