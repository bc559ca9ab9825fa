package main

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"strconv"
	"strings"
	"testing"
)

// nopCloser is a buffer the chart is written to.
type nopCloser struct{ *bytes.Buffer }

func (nopCloser) Close() error { return nil }

// drawn is a point read back from the SVG.
type drawn struct {
	series    string
	n         int
	value     float64
	cx, cy    float64
	panelUnit string
}

// readSVG parses the chart as XML and returns its points.
func readSVG(t *testing.T, svg []byte) []drawn {
	t.Helper()
	dec := xml.NewDecoder(bytes.NewReader(svg))
	var out []drawn
	unit := ""
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("the chart is not well-formed XML: %v\n%s", err, svg)
		}
		se, ok := tok.(xml.StartElement)
		if !ok {
			continue
		}
		attr := map[string]string{}
		for _, a := range se.Attr {
			attr[a.Name.Local] = a.Value
		}
		switch se.Name.Local {
		case "g":
			unit = attr["data-unit"]
		case "circle":
			d := drawn{series: attr["data-series"], panelUnit: unit}
			var e1, e2, e3, e4 error
			d.n, e1 = strconv.Atoi(attr["data-n"])
			d.value, e2 = strconv.ParseFloat(attr["data-value"], 64)
			d.cx, e3 = strconv.ParseFloat(attr["cx"], 64)
			d.cy, e4 = strconv.ParseFloat(attr["cy"], 64)
			if err := errors.Join(e1, e2, e3, e4); err != nil {
				t.Fatalf("circle %v: %v", attr, err)
			}
			out = append(out, d)
		}
	}
}

const sampleReport = `{"started":"2026-11-26T10:00:00Z","machine":{"commit":"abc123"},"figures":[
 {"row":"PodSet vs ReplicaSet, 1000 pods","metric":"all pods exist","unit":"s","deckhand":3,"alternative":4},
 {"row":"scale: JobWatcher vs TTL controller, N finished Jobs present","metric":"deletion lag after TTL, p99","unit":"s","n":1000,"deckhand":0.4,"alternative":1.2},
 {"row":"scale: JobWatcher vs TTL controller, N finished Jobs present","metric":"deletion lag after TTL, p99","unit":"s","n":100000,"deckhand":0.9,"alternative":3.5},
 {"row":"scale: JobWatcher vs TTL controller, N finished Jobs present","metric":"deletion lag after TTL, p99","unit":"s","n":10000,"deckhand":0.6,"alternative":null},
 {"row":"scale: JobWatcher manager memory, N finished Jobs","metric":"heap in use","unit":"MiB","n":1000,"deckhand":20,"alternative":null},
 {"row":"scale: JobWatcher manager memory, N finished Jobs","metric":"heap in use","unit":"MiB","n":10000,"deckhand":28,"alternative":null},
 {"row":"scale: JobWatcher manager memory, N finished Jobs","metric":"heap per object","unit":"B","n":10000,"deckhand":800,"alternative":null}
]}`

func TestChartDrawsThePointsItIsGiven(t *testing.T) {
	var buf bytes.Buffer
	if err := run(func() (io.WriteCloser, error) { return nopCloser{&buf}, nil }, strings.NewReader(sampleReport)); err != nil {
		t.Fatal(err)
	}
	points := readSVG(t, buf.Bytes())
	lag, alt := "scale: JobWatcher vs TTL controller: deletion lag after TTL, p99", "scale: JobWatcher vs TTL controller: deletion lag after TTL, p99 (alternative)"
	heap := "scale: JobWatcher manager memory: heap in use"
	want := []drawn{
		{series: lag, n: 1000, value: 0.4, panelUnit: "s"},
		{series: lag, n: 10000, value: 0.6, panelUnit: "s"},
		{series: lag, n: 100000, value: 0.9, panelUnit: "s"},
		{series: alt, n: 1000, value: 1.2, panelUnit: "s"},
		{series: alt, n: 100000, value: 3.5, panelUnit: "s"},
		{series: heap, n: 1000, value: 20, panelUnit: "MiB"},
		{series: heap, n: 10000, value: 28, panelUnit: "MiB"},
	}
	if len(points) != len(want) {
		t.Fatalf("drew %d points, want %d (no N, no value, other units are left out): %+v", len(points), len(want), points)
	}
	at := map[string]drawn{}
	for _, p := range points {
		at[p.series+"@"+strconv.Itoa(p.n)] = p
	}
	for _, w := range want {
		got, ok := at[w.series+"@"+strconv.Itoa(w.n)]
		if !ok {
			t.Errorf("no point for %s at N=%d", w.series, w.n)
			continue
		}
		if got.value != w.value || got.panelUnit != w.panelUnit {
			t.Errorf("%s at N=%d: drew %g in the %s panel, want %g in the %s panel", w.series, w.n, got.value, got.panelUnit, w.value, w.panelUnit)
		}
	}
	// The x axis is logarithmic: each decade of N is the same distance.
	x1, x2, x3 := at[lag+"@1000"].cx, at[lag+"@10000"].cx, at[lag+"@100000"].cx
	if !(x1 < x2 && x2 < x3) || math.Abs((x2-x1)-(x3-x2)) > 0.5 {
		t.Errorf("x of N=1k, 10k, 100k is %g, %g, %g: not equal steps per decade", x1, x2, x3)
	}
	// The y axis is linear from 0: 0.4 s sits 4/9 as high above the axis
	// as 0.9 s within one panel, and a larger value is drawn higher (SVG y
	// grows downwards).
	y04, y09, y12 := at[lag+"@1000"].cy, at[lag+"@100000"].cy, at[alt+"@1000"].cy
	if !(y12 < y09 && y09 < y04) {
		t.Errorf("y of 1.2, 0.9, 0.4 s is %g, %g, %g: larger values must be higher", y12, y09, y04)
	}
	zero := y04 + (y04-y09)*0.4/0.5 // where 0 s is, from the two points
	if ratio := (zero - y04) / (zero - y09); math.Abs(ratio-0.4/0.9) > 0.01 {
		t.Errorf("0.4 s is drawn %.3f as high as 0.9 s, want %.3f", ratio, 0.4/0.9)
	}
}

func TestChartWithoutScaleFiguresWritesNothing(t *testing.T) {
	opened := false
	err := run(func() (io.WriteCloser, error) { opened = true; return nopCloser{&bytes.Buffer{}}, nil },
		strings.NewReader(`{"figures":[{"row":"PodSet","metric":"m","unit":"s","deckhand":1}]}`))
	if !errors.Is(err, errNoScale) || opened {
		t.Fatalf("run = %v, output opened %v; want errNoScale and no output", err, opened)
	}
}

// A run of one size is drawn beside an earlier run's other sizes; where
// both measured the same figure at the same N, the later one is drawn, and
// the title names both runs.
func TestChartMergesReportsLaterFiguresWin(t *testing.T) {
	later := `{"started":"2026-11-27T10:00:00Z","machine":{"commit":"def456"},"figures":[
 {"row":"scale: JobWatcher vs TTL controller, N finished Jobs present","metric":"deletion lag after TTL, p99","unit":"s","n":100000,"deckhand":0.7,"alternative":3.1},
 {"row":"scale: JobWatcher vs TTL controller, N finished Jobs present","metric":"deletion lag after TTL, p99","unit":"s","n":1000000,"deckhand":1.5,"alternative":null}
]}`
	var buf bytes.Buffer
	if err := run(func() (io.WriteCloser, error) { return nopCloser{&buf}, nil }, strings.NewReader(sampleReport), strings.NewReader(later)); err != nil {
		t.Fatal(err)
	}
	lag := "scale: JobWatcher vs TTL controller: deletion lag after TTL, p99"
	got := map[int]float64{}
	for _, p := range readSVG(t, buf.Bytes()) {
		if p.series == lag {
			got[p.n] = p.value
		}
	}
	want := map[int]float64{1000: 0.4, 10000: 0.6, 100000: 0.7, 1000000: 1.5}
	if len(got) != len(want) {
		t.Fatalf("drew %v, want %v", got, want)
	}
	for n, v := range want {
		if got[n] != v {
			t.Errorf("N=%d: drew %g, want %g (the later report's where both have it)", n, got[n], v)
		}
	}
	for _, s := range []string{"commit abc123", "commit def456"} {
		if !strings.Contains(buf.String(), s) {
			t.Errorf("the title does not name %s", s)
		}
	}
}
