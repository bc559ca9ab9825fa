// Command docscheck checks the project's Markdown pages: every relative link
// names a file that exists and, with a #fragment, a heading of that page;
// and the pages users read (README.md, docs/guides, docs/operations,
// docs/reference, the samples' comments) speak of the project only, never
// of how it was built (work items, seed documents, working sessions). `make
// verify` runs it.
package main

import (
	"bufio"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"github.com/deckhand-dev/deckhand/hack/internal/markdown"
)

func main() {
	problems, err := check(".")
	if err != nil {
		fmt.Fprintf(os.Stderr, "docscheck: %v\n", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Fprintln(os.Stderr, p)
	}
	if len(problems) > 0 {
		fmt.Fprintf(os.Stderr, "docscheck: %d problems\n", len(problems))
		os.Exit(1)
	}
}

// userPages are the pages (and folders of pages) written for users.
var userPages = []string{"README.md", "docs/guides", "docs/operations", "docs/reference", "config/samples"}

// internalWords are words of the project's making, not of its use.
// ("session" alone is Kubernetes's word too: sessionAffinity.)
var internalWords = regexp.MustCompile(`(?i)\bseeds?\b|\bseed's|\bsessions? \d+|\bthis session\b|\(session|\bissues? #?\d+|\(issue\b`)

// check returns every problem found in the pages under root.
func check(root string) ([]string, error) {
	var pages []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() && (rel == "bin" || rel == "dist" || rel == ".git") {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasSuffix(path, ".md") {
			pages = append(pages, rel)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	var problems []string
	headings := map[string][]string{}
	for _, page := range pages {
		h, err := pageHeadings(filepath.Join(root, page))
		if err != nil {
			return nil, err
		}
		headings[page] = h
	}
	for _, page := range pages {
		found, err := checkLinks(root, page, headings)
		if err != nil {
			return nil, err
		}
		problems = append(problems, found...)
	}
	samples, _ := filepath.Glob(filepath.Join(root, "config", "samples", "*.yaml"))
	for _, s := range samples {
		rel, _ := filepath.Rel(root, s)
		pages = append(pages, rel)
	}
	for _, page := range pages {
		if !isUserPage(page) {
			continue
		}
		found, err := checkWords(filepath.Join(root, page), page)
		if err != nil {
			return nil, err
		}
		problems = append(problems, found...)
	}
	return problems, nil
}

func isUserPage(page string) bool {
	page = filepath.ToSlash(page)
	return slices.ContainsFunc(userPages, func(p string) bool { return page == p || strings.HasPrefix(page, p+"/") })
}

var link = regexp.MustCompile(`\]\(([^)\s]+)\)`)

// checkLinks reports the relative links of page whose file or heading is
// missing. Links in fenced code are not links.
func checkLinks(root, page string, headings map[string][]string) ([]string, error) {
	f, err := os.Open(filepath.Join(root, page))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	var problems []string
	fenced := false
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; s.Scan(); n++ {
		line := s.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range link.FindAllStringSubmatch(line, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, fragment, _ := strings.Cut(target, "#")
			dest := page
			if file != "" {
				dest = filepath.Clean(filepath.Join(filepath.Dir(page), file))
				if _, err := os.Stat(filepath.Join(root, dest)); err != nil {
					problems = append(problems, fmt.Sprintf("%s:%d: link to %s: no such file", page, n, target))
					continue
				}
			}
			if fragment == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			if !slices.Contains(headings[dest], fragment) {
				problems = append(problems, fmt.Sprintf("%s:%d: link to %s: %s has no heading #%s", page, n, target, dest, fragment))
			}
		}
	}
	return problems, s.Err()
}

// pageHeadings lists the fragments GitHub gives the headings of a page.
func pageHeadings(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]int{}
	fenced := false
	for line := range strings.Lines(string(data)) {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		a := markdown.Anchor(text)
		if k := seen[a]; k > 0 {
			out = append(out, fmt.Sprintf("%s-%d", a, k))
		} else {
			out = append(out, a)
		}
		seen[a]++
	}
	return out, nil
}

// checkWords reports the lines of a user page that speak of how the project
// was built.
func checkWords(path, page string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var problems []string
	n := 0
	for line := range strings.Lines(string(data)) {
		n++
		if w := internalWords.FindString(line); w != "" {
			problems = append(problems, fmt.Sprintf("%s:%d: a user page says %q: say what the project does, not how it was built", page, n, w))
		}
	}
	return problems, nil
}
