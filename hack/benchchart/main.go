// Command benchchart draws the scale rows of a `make bench` run: latency
// (figures in seconds) and memory (figures in MiB) against the object count
// N, on a log x axis, one line per figure and side (Deckhand solid, the
// alternative dashed), as one SVG file. It reads the bench's JSON report
// (bin/bench/latest.json) and draws only figures that carry an N; a run
// without scale rows leaves the output file as it was.
//
//	go run ./hack/benchchart -in bin/bench/latest.json -out docs/img/scale.svg
//
// -in takes several reports, comma-separated, oldest first: a run of one
// size (N = 100,000 takes most of an hour) is drawn beside an earlier run's
// smaller sizes. A figure (row, metric and N) of a later report replaces the
// same figure of an earlier one, and the title names every report's commit
// and start.
//
// Every point is a <circle> with data-series, data-n and data-value
// attributes, so what the chart shows can be read back from it.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"html"
	"io"
	"math"
	"os"
	"slices"
	"strings"
)

// figure is what the chart reads of one line of the bench's report.
type figure struct {
	Row         string   `json:"row"`
	Metric      string   `json:"metric"`
	Unit        string   `json:"unit"`
	N           int      `json:"n"`
	Deckhand    *float64 `json:"deckhand"`
	Alternative *float64 `json:"alternative"`
}

type report struct {
	Started string `json:"started"`
	Machine struct {
		Commit string `json:"commit"`
	} `json:"machine"`
	Figures []figure `json:"figures"`
}

// point is one measurement at N.
type point struct {
	N     int
	Value float64
}

// series is one line of a panel: a figure's metric on one side, against N.
type series struct {
	Name   string
	Dashed bool // the alternative's side
	Points []point
}

// panel is one chart: the series of one unit.
type panel struct {
	Title, Unit string
	Series      []series
}

// panels groups the report's scale figures (those with an N) by unit into
// a latency panel (s) and a memory panel (MiB); series keep the order the
// report first names them in, points are sorted by N.
func panels(rep report) []panel {
	out := []panel{{Title: "latency against N", Unit: "s"}, {Title: "memory against N", Unit: "MiB"}}
	for i := range out {
		p := &out[i]
		add := func(name string, dashed bool, n int, v *float64) {
			if v == nil || math.IsNaN(*v) || math.IsInf(*v, 0) {
				return
			}
			j := slices.IndexFunc(p.Series, func(s series) bool { return s.Name == name })
			if j < 0 {
				p.Series = append(p.Series, series{Name: name, Dashed: dashed})
				j = len(p.Series) - 1
			}
			p.Series[j].Points = append(p.Series[j].Points, point{N: n, Value: *v})
		}
		for _, f := range rep.Figures {
			if f.N <= 0 || f.Unit != p.Unit {
				continue
			}
			name := shortRow(f.Row) + ": " + f.Metric
			add(name, false, f.N, f.Deckhand)
			add(name+" (alternative)", true, f.N, f.Alternative)
		}
		for j := range p.Series {
			slices.SortFunc(p.Series[j].Points, func(a, b point) int { return a.N - b.N })
		}
	}
	return slices.DeleteFunc(out, func(p panel) bool { return len(p.Series) == 0 })
}

// shortRow is a row's name up to its first comma: "scale: JobWatcher vs
// TTL controller".
func shortRow(row string) string {
	if i := strings.IndexByte(row, ','); i > 0 {
		return row[:i]
	}
	return row
}

// Layout of one panel, in SVG user units.
const (
	panelW, panelH          = 640, 360
	left, right, top, below = 70, 20, 40, 50
	legendLine              = 16
	sourceLine              = 14
)

var colors = []string{"#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf"}

// draw writes the panels as one SVG, stacked, each with its legend below,
// under the title and a line per report drawn.
func draw(w io.Writer, title string, sources []string, ps []panel) error {
	var b strings.Builder
	head := 30 + sourceLine*len(sources)
	height := head
	for _, p := range ps {
		height += panelH + legendLine*len(p.Series) + 10
	}
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n",
		panelW, height, panelW, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%d" y="18" font-size="13">%s</text>`+"\n", left, html.EscapeString(title))
	for i, s := range sources {
		fmt.Fprintf(&b, `<text x="%d" y="%d">%s</text>`+"\n", left, 18+sourceLine*(i+1), html.EscapeString(s))
	}
	y0 := head
	for _, p := range ps {
		drawPanel(&b, p, y0)
		y0 += panelH + legendLine*len(p.Series) + 10
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func drawPanel(b *strings.Builder, p panel, y0 int) {
	minN, maxN, maxV := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range p.Series {
		for _, pt := range s.Points {
			minN, maxN, maxV = math.Min(minN, float64(pt.N)), math.Max(maxN, float64(pt.N)), math.Max(maxV, pt.Value)
		}
	}
	// Whole decades on x; one decade at least, so a single N has room.
	lo, hi := math.Floor(math.Log10(minN)), math.Ceil(math.Log10(maxN))
	if hi <= lo {
		hi = lo + 1
	}
	if maxV <= 0 {
		maxV = 1
	}
	maxV = niceCeil(maxV)
	plotW, plotH := float64(panelW-left-right), float64(panelH-top-below)
	x := func(n int) float64 { return left + (math.Log10(float64(n))-lo)/(hi-lo)*plotW }
	y := func(v float64) float64 { return float64(y0+top) + plotH - v/maxV*plotH }

	fmt.Fprintf(b, `<g class="panel" data-unit="%s">`+"\n", html.EscapeString(p.Unit))
	fmt.Fprintf(b, `<text x="%d" y="%d" font-size="12">%s (%s)</text>`+"\n", left, y0+top-12, html.EscapeString(p.Title), html.EscapeString(p.Unit))
	// Axes, ticks and grid.
	fmt.Fprintf(b, `<path d="M%d %.1f V%.1f H%.1f" stroke="black" fill="none"/>`+"\n", left, float64(y0+top), y(0), left+plotW)
	for d := lo; d <= hi; d++ {
		xd := left + (d-lo)/(hi-lo)*plotW
		fmt.Fprintf(b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/>`+"\n", xd, float64(y0+top), xd, y(0))
		fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">%s</text>`+"\n", xd, y(0)+16, count(math.Pow(10, d)))
	}
	for i := 0; i <= 4; i++ {
		v := maxV * float64(i) / 4
		fmt.Fprintf(b, `<line x1="%d" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#eee"/>`+"\n", left, y(v), left+plotW, y(v))
		fmt.Fprintf(b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", left-6, y(v)+4, trim(v))
	}
	fmt.Fprintf(b, `<text x="%.1f" y="%.1f" text-anchor="middle">N (objects, log scale)</text>`+"\n", left+plotW/2, y(0)+34)
	for i, s := range p.Series {
		color := colors[i%len(colors)]
		dash := ""
		if s.Dashed {
			dash = ` stroke-dasharray="5 4"`
		}
		var d strings.Builder
		for j, pt := range s.Points {
			fmt.Fprintf(&d, "%s%.1f %.1f ", map[bool]string{true: "M", false: "L"}[j == 0], x(pt.N), y(pt.Value))
		}
		fmt.Fprintf(b, `<path d="%s" stroke="%s" fill="none" stroke-width="1.5"%s/>`+"\n", strings.TrimSpace(d.String()), color, dash)
		for _, pt := range s.Points {
			fmt.Fprintf(b, `<circle cx="%.1f" cy="%.1f" r="3" fill="%s" data-series="%s" data-n="%d" data-value="%g"/>`+"\n",
				x(pt.N), y(pt.Value), color, html.EscapeString(s.Name), pt.N, pt.Value)
		}
		ly := y0 + panelH + legendLine*i
		fmt.Fprintf(b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="1.5"%s/>`+"\n", left, ly-4, left+24, ly-4, color, dash)
		fmt.Fprintf(b, `<text x="%d" y="%d">%s</text>`+"\n", left+30, ly, html.EscapeString(s.Name))
	}
	b.WriteString("</g>\n")
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

func count(v float64) string {
	switch {
	case v >= 1e6:
		return trim(v/1e6) + "M"
	case v >= 1e3:
		return trim(v/1e3) + "k"
	}
	return trim(v)
}

func trim(v float64) string { return strings.TrimSuffix(fmt.Sprintf("%.3g", v), ".0") }

// errNoScale says the report holds no scale figures.
var errNoScale = errors.New("no scale figures (none carries an N)")

// run reads the reports from ins, merged by merge, and writes the chart to
// out.
func run(out func() (io.WriteCloser, error), ins ...io.Reader) error {
	reps := make([]report, len(ins))
	for i, in := range ins {
		if err := json.NewDecoder(in).Decode(&reps[i]); err != nil {
			return fmt.Errorf("reading bench report %d: %w", i+1, err)
		}
	}
	rep, sources := merge(reps)
	ps := panels(rep)
	if len(ps) == 0 {
		return errNoScale
	}
	w, err := out()
	if err != nil {
		return err
	}
	return errors.Join(draw(w, "Deckhand scale rows", sources, ps), w.Close())
}

// merge is one report of the figures of reps, oldest first: a figure of a
// later report replaces the same row, metric and N of an earlier one. It
// also returns, for the title, each report that gave a figure its commit and
// start.
func merge(reps []report) (report, []string) {
	type key struct {
		row, metric string
		n           int
	}
	var merged report
	at := map[key]int{}
	var sources []string
	for _, rep := range reps {
		used := false
		for _, f := range rep.Figures {
			k := key{f.Row, f.Metric, f.N}
			if i, ok := at[k]; ok {
				merged.Figures[i] = f
			} else {
				at[k] = len(merged.Figures)
				merged.Figures = append(merged.Figures, f)
			}
			used = used || f.N > 0
		}
		if !used {
			continue
		}
		var source []string
		if rep.Machine.Commit != "" {
			source = append(source, "commit "+rep.Machine.Commit)
		}
		if rep.Started != "" {
			source = append(source, "run "+rep.Started)
		}
		sources = append(sources, "from "+strings.Join(source, ", "))
	}
	return merged, sources
}

func main() {
	in := flag.String("in", "bin/bench/latest.json", "the bench's JSON reports, comma-separated, oldest first")
	out := flag.String("out", "docs/img/scale.svg", "the SVG file to write")
	flag.Parse()
	names := strings.Split(*in, ",")
	ins := make([]io.Reader, 0, len(names))
	for _, name := range names {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "benchchart:", err)
			os.Exit(1)
		}
		defer f.Close() //nolint:errcheck // read only
		ins = append(ins, f)
	}
	err := run(func() (io.WriteCloser, error) { return os.Create(*out) }, ins...)
	switch {
	case errors.Is(err, errNoScale):
		fmt.Fprintf(os.Stderr, "benchchart: %v in %s; %s left as it was\n", err, *in, *out)
	case err != nil:
		fmt.Fprintln(os.Stderr, "benchchart:", err)
		os.Exit(1)
	default:
		fmt.Fprintf(os.Stderr, "benchchart: wrote %s\n", *out)
	}
}
