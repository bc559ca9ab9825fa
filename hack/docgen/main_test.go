package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The committed reference pages are what docgen writes now: a flag, a Helm
// value or an API field changed without `make manifests` fails here (and
// `make verify`).
func TestTheReferencePagesAreFresh(t *testing.T) {
	out := t.TempDir()
	root := filepath.Join("..", "..")
	wd, _ := os.Getwd()
	if err := os.Chdir(root); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.Chdir(wd) })
	if err := run("config/crd/bases", out); err != nil {
		t.Fatal(err)
	}
	for _, page := range []string{"api.md", "flags.md", "helm-values.md", "metrics.md", "events.md"} {
		want, err := os.ReadFile(filepath.Join(out, page))
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join("docs", "reference", page))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("docs/reference/%s is stale: run 'make manifests' and commit", page)
		}
	}
}

// A Helm value's comment, and an example indented in it, reach its row.
func TestValuesPage(t *testing.T) {
	page, err := valuesPage([]byte("# Where it runs.\nnodeSelector: {}\nimage:\n  # The tag.\n  tag: v1\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| `nodeSelector` | `{}` | Where it runs. |", "| `image.tag` | `v1` | The tag. |"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("values page lacks %q:\n%s", want, page)
		}
	}
}

// An Event reason, condition or reason without a comment stops docgen,
// naming it; a metric's name, type, labels (a shared list, concatenated)
// and help reach its row.
func TestSourcePages(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import (
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// Event reasons.
const (
	// EventDone: the work is done.
	EventDone = "Done"
	EventLost = "Lost"
)

var shared = []string{"namespace"}

var m = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "deckhand_x_total",
	Help: "Things " + "done.",
}, slices.Concat(shared, []string{"result"}))
`
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := readConstants(dir, eventConst); err == nil || !strings.Contains(err.Error(), "EventLost has no comment") {
		t.Errorf("an Event reason without a comment: %v", err)
	}
	ms, err := readMetrics(dir)
	if err != nil || len(ms) != 1 {
		t.Fatalf("%v, %v", ms, err)
	}
	if row := string(metricsPage(ms)); !strings.Contains(row, "| `deckhand_x_total` | counter | `namespace`, `result` | Things done. |") {
		t.Errorf("the page:\n%s", row)
	}
}

// README's table of kinds has a row per "kinds table" comment of the
// guides, linking to the guide (and to a heading, when the comment names
// one), and keeps what is around it.
func TestReadmeKindsComeFromTheGuides(t *testing.T) {
	guides := t.TempDir()
	for name, page := range map[string]string{
		"gadget.md": "# Gadget\n<!-- kinds table: **Gadget** (`ga`) | does a thing -->\n\ntext\n",
		"box.md":    "# Box\n<!-- kinds table: **Box** | boxes -->\n<!-- kinds table #lids: **Lid** | a box's lid -->\n",
		"other.md":  "# Not a kind\n",
	} {
		if err := os.WriteFile(filepath.Join(guides, name), []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	readme := "# Title\n\n" + guideTables[0].begin() + "\n\n| old |\n\n" + guideTables[0].end() + "\n\n## Next\n"
	got, err := guideTables[0].write([]byte(readme), guides)
	if err != nil {
		t.Fatal(err)
	}
	want := "# Title\n\n" + guideTables[0].begin() + "\n\n| kind | what it promises | guide |\n|---|---|---|\n" +
		"| **Box** | boxes | [guides/box.md](docs/guides/box.md) |\n" +
		"| **Lid** | a box's lid | [guides/box.md](docs/guides/box.md#lids) |\n" +
		"| **Gadget** (`ga`) | does a thing | [guides/gadget.md](docs/guides/gadget.md) |\n" +
		"\n" + guideTables[0].end() + "\n\n## Next\n"
	if string(got) != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
	health := guideTable{page: "health.md", marker: "health table", header: "| kind | Ready | Stalled |"}
	if err := os.WriteFile(filepath.Join(guides, "gadget.md"), []byte("# Gadget\n<!-- health table: Gadget | on | never -->\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err = health.write([]byte(health.begin()+"\n\n"+health.end()+"\n"), guides)
	if err != nil {
		t.Fatal(err)
	}
	if want := health.begin() + "\n\n| kind | Ready | Stalled |\n|---|---|---|\n| Gadget | on | never |\n\n" + health.end() + "\n"; string(got) != want {
		t.Errorf("a table without links: got\n%s\nwant\n%s", got, want)
	}
	if _, err := guideTables[0].write([]byte("# no markers\n"), guides); err == nil {
		t.Error("a README without the markers: no error")
	}
}
