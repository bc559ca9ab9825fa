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
