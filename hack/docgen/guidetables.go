package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The tables that list every kind are written from the guides: each kind's
// row is a comment in its guide, beside what the row says of it,
//
//	<!-- kinds table: **Gadget** (`ga`) | what it promises -->
//	<!-- kinds table #a-heading: ... -->   (README's row links to that heading)
//
// so that a new kind's guide brings its rows and no page lists kinds by
// hand. A table sits between two comment lines naming the guides' comment.
type guideTable struct {
	page   string // the page the table is in
	marker string // the guides' comment that holds a row: "kinds table"
	header string // the table's heading row
	link   bool   // whether each row ends in a link to its guide
}

var guideTables = []guideTable{
	{page: "README.md", marker: "kinds table", header: "| kind | what it promises | guide |", link: true},
	{page: "docs/operations/gitops.md", marker: "health table", header: "| kind | Ready | Stalled |"},
	{page: "docs/operations/security.md", marker: "reach table", header: "| kind | acts as | reaches |"},
	{page: "docs/development/architecture.md", marker: "where table", header: "| kind | API | controller | webhook | guide | e2e |"},
}

// begin and end are the lines a table sits between.
func (g guideTable) begin() string {
	return fmt.Sprintf("<!-- This table is written by hack/docgen from each guide's %q comment: edit those. -->", g.marker)
}

func (g guideTable) end() string { return "<!-- End of the table written from the guides. -->" }

// write returns page with the table written from the guides in guides (a
// directory, read in the order of the files' names).
func (g guideTable) write(page []byte, guides string) ([]byte, error) {
	before, rest, ok := strings.Cut(string(page), g.begin()+"\n")
	_, after, ok2 := strings.Cut(rest, "\n"+g.end()+"\n")
	if !ok || !ok2 {
		return nil, fmt.Errorf("%s has no lines %q and %q around its table", g.page, g.begin(), g.end())
	}
	row := regexp.MustCompile(`^<!-- ` + regexp.QuoteMeta(g.marker) + `(?: #([a-z0-9-]+))?: (.+) -->$`)
	pages, err := filepath.Glob(filepath.Join(guides, "*.md"))
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	b.WriteString(before + g.begin() + "\n\n" + g.header + "\n|" + strings.Repeat("---|", strings.Count(g.header, "|")-1) + "\n")
	for _, p := range pages {
		data, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		guide := "guides/" + filepath.Base(p)
		for _, line := range strings.Split(string(data), "\n") {
			m := row.FindStringSubmatch(line)
			if m == nil {
				continue
			}
			if !g.link {
				fmt.Fprintf(&b, "| %s |\n", m[2])
				continue
			}
			target := guide
			if m[1] != "" {
				target += "#" + m[1]
			}
			fmt.Fprintf(&b, "| %s | [%s](docs/%s) |\n", m[2], guide, target)
		}
	}
	b.WriteString("\n" + g.end() + "\n" + after)
	return []byte(b.String()), nil
}

// writeGuideTables rewrites every table of guideTables under root.
func writeGuideTables(root string) error {
	for _, g := range guideTables {
		path := filepath.Join(root, g.page)
		page, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if page, err = g.write(page, filepath.Join(root, "docs", "guides")); err != nil {
			return err
		}
		if err := os.WriteFile(path, page, 0o644); err != nil {
			return err
		}
	}
	return nil
}
