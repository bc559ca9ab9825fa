package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// README's table of kinds is written from the guides: each kind's row is a
// comment in its guide, beside what the row promises,
//
//	<!-- kinds table: **Gadget** (`ga`) | what it promises -->
//	<!-- kinds table #a-heading: ... -->   (the row links to that heading)
//
// so that a new kind's guide brings its row and README lists no kind by hand.
var kindsRow = regexp.MustCompile(`^<!-- kinds table(?: #([a-z0-9-]+))?: (.+) -->$`)

// The lines README's table sits between.
const (
	kindsBegin = "<!-- The table of kinds is written by hack/docgen from each guide's \"kinds table\" comment: edit those. -->"
	kindsEnd   = "<!-- End of the table of kinds. -->"
)

// readmeKinds returns readme with its table of kinds written from the
// guides in guides (a directory, read in the order of the files' names).
func readmeKinds(readme []byte, guides string) ([]byte, error) {
	before, rest, ok := strings.Cut(string(readme), kindsBegin+"\n")
	_, after, ok2 := strings.Cut(rest, "\n"+kindsEnd+"\n")
	if !ok || !ok2 {
		return nil, fmt.Errorf("README.md has no lines %q and %q around its table of kinds", kindsBegin, kindsEnd)
	}
	pages, err := filepath.Glob(filepath.Join(guides, "*.md"))
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(before + kindsBegin + "\n\n| kind | what it promises | guide |\n|---|---|---|\n")
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		page := "guides/" + filepath.Base(p)
		for _, line := range strings.Split(string(data), "\n") {
			m := kindsRow.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			target := page
			if m[1] != "" {
				target += "#" + m[1]
			}
			fmt.Fprintf(&b, "| %s | [%s](docs/%s) |\n", m[2], page, target)
		}
	}
	b.WriteString("\n" + kindsEnd + "\n" + after)
	return []byte(b.String()), nil
}
