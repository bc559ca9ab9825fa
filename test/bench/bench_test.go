//go:build bench

// Package bench measures Deckhand against what users would run instead, on
// a local cluster it starts for the run: the pinned control plane with kwok
// nodes, and the real manager binary. `make bench` runs it; see
// docs/dev-log/performance.md for what each row means.
//
// Environment:
//
//	BENCH_ROWS    comma-separated rows to run (default all): podset, jobwatcher,
//	              modelbox, podbugger, incidents (on the real node, which it
//	              starts), crashloop, ceiling, idle, the scale family
//	              (scale-jobwatcher, scale-podbugger, scale-podset,
//	              scale-modelbox), memory
//	BENCH_REPEAT  rounds per comparison, the median is reported (default 3)
//	BENCH_SCALE   multiplies every object count of the fixed-size rows, for a
//	              quick run (default 1); the scale rows take BENCH_SIZES
//	BENCH_SIZES   the object counts N every scale row runs at, comma-separated
//	              (default 1000,10000; 100000 where the machine allows)
//	BENCH_NODES   kwok nodes (default 100: 10,000 unrelated pods at 110 a node)
//	BENCH_IDLE    seconds of idle time measured (default 90)
//	DECKHAND_BIN  the manager binary (default bin/deckhand)
//	BENCH_COMPARE_BIN  another manager binary whose memory is measured in the
//	              same rounds, as the alternative column (before/after a change)
package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/test/cluster"
)

// settings are the run's knobs, from the environment.
type settings struct {
	rows   []string
	repeat int
	scale  float64
	sizes  []int
	nodes  int
	idle   time.Duration
}

// allRows in the order they run. The scale rows ("scale-" and a kind) run
// at every size of BENCH_SIZES and register themselves (scaleRows); they
// run before the memory row, which stops the shared manager.
var allRows = []string{"podset", "jobwatcher", "modelbox", "podbugger", "incidents", "crashloop", "ceiling", "idle",
	"scale-jobwatcher", "scale-podbugger", "scale-podset", "scale-modelbox", "memory"}

// scaleRows are the rows of the scale family, by name, each in its own
// file: a row measures at every size of b.s.sizes and gives each figure
// its N.
var scaleRows = map[string]func(b *bench){}

// defaultSizes are the scale rows' object counts without BENCH_SIZES.
var defaultSizes = []int{1000, 10000}

func settingsFromEnv(t *testing.T) settings {
	// A scale row another branch has not brought in yet is left out.
	built := func(r string) bool { _, ok := scaleRows[r]; return ok || !strings.HasPrefix(r, "scale-") }
	s := settings{rows: slices.DeleteFunc(slices.Clone(allRows), func(r string) bool { return !built(r) }),
		repeat: 3, scale: 1, sizes: defaultSizes, nodes: 100, idle: 90 * time.Second}
	if v := os.Getenv("BENCH_ROWS"); v != "" {
		s.rows = nil
		for _, r := range strings.Split(v, ",") {
			r = strings.TrimSpace(r)
			if !slices.Contains(allRows, r) || !built(r) {
				t.Fatalf("BENCH_ROWS: unknown row %q (known: %s)", r, strings.Join(allRows, ", "))
			}
			s.rows = append(s.rows, r)
		}
	}
	num := func(name string, into *float64) {
		if v := os.Getenv(name); v != "" {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 {
				t.Fatalf("%s: %q is not a positive number", name, v)
			}
			*into = f
		}
	}
	repeat, nodes, idle := float64(s.repeat), float64(s.nodes), s.idle.Seconds()
	num("BENCH_REPEAT", &repeat)
	num("BENCH_SCALE", &s.scale)
	num("BENCH_NODES", &nodes)
	num("BENCH_IDLE", &idle)
	s.repeat, s.nodes, s.idle = int(repeat), int(nodes), time.Duration(idle*float64(time.Second))
	if v := os.Getenv("BENCH_SIZES"); v != "" {
		sizes, err := parseSizes(v)
		if err != nil {
			t.Fatalf("BENCH_SIZES: %v", err)
		}
		s.sizes = sizes
	}
	return s
}

// parseSizes reads BENCH_SIZES: positive object counts, at most 1,000,000
// each, in the order given.
func parseSizes(v string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 || n > 1_000_000 {
			return nil, fmt.Errorf("%q is not an object count between 1 and 1000000", f)
		}
		out = append(out, n)
	}
	return out, nil
}

// n scales an object count, keeping at least one.
func (s settings) n(count int) int { return max(1, int(math.Round(float64(count)*s.scale))) }

func (s settings) has(row string) bool { return slices.Contains(s.rows, row) }

// figure is one line of the table: a measurement of Deckhand, of its
// alternative (NaN when there is none), their ratio and the verdict on the
// target. A scale row's figure carries the object count N it was measured
// at, so that hack/benchchart draws it against N.
type figure struct {
	Row         string    `json:"row"`
	Metric      string    `json:"metric"`
	N           int       `json:"n,omitempty"`
	Unit        string    `json:"unit"`
	Deckhand    float64   `json:"deckhand"`
	Alternative float64   `json:"alternative"`
	Ratio       float64   `json:"ratio"`
	Target      string    `json:"target,omitempty"`
	Verdict     string    `json:"verdict,omitempty"`
	Gate        bool      `json:"gate,omitempty"` // a miss fails the run
	Samples     []float64 `json:"samplesDeckhand,omitempty"`
	AltSamples  []float64 `json:"samplesAlternative,omitempty"`
}

// report collects the figures of a run.
type report struct {
	Started  time.Time `json:"started"`
	Machine  machine   `json:"machine"`
	Settings struct {
		Rows   []string `json:"rows"`
		Repeat int      `json:"repeat"`
		Scale  float64  `json:"scale"`
		Sizes  []int    `json:"sizes"`
		Nodes  int      `json:"nodes"`
		IdleS  float64  `json:"idleSeconds"`
	} `json:"settings"`
	Figures []*figure `json:"figures"`
	LoadEnd string    `json:"loadAverageAtEnd"`
}

type machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemTotal  string `json:"memTotal"`
	GoVersion string `json:"goVersion"`
	Commit    string `json:"commit"`
	LoadStart string `json:"loadAverageAtStart"`
}

// add records a comparison: the medians of both sides and their ratio.
func (r *report) add(f *figure, deckhand, alternative []float64) *figure {
	f.Samples, f.AltSamples = deckhand, alternative
	f.Deckhand, f.Alternative = median(deckhand), median(alternative)
	f.Ratio = f.Deckhand / f.Alternative
	r.Figures = append(r.Figures, f)
	return f
}

// judge sets the verdict: ok is whether the target is met.
func (f *figure) judge(target string, ok bool) {
	f.Target = target
	f.Verdict = "MISS"
	if ok {
		f.Verdict = "PASS"
	}
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return math.NaN()
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func TestBench(t *testing.T) {
	logf.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	s := settingsFromEnv(t)
	rep := &report{Started: time.Now().UTC(), Machine: describeMachine()}
	rep.Settings.Rows, rep.Settings.Repeat, rep.Settings.Scale, rep.Settings.Nodes, rep.Settings.IdleS = s.rows, s.repeat, s.scale, s.nodes, s.idle.Seconds()
	rep.Settings.Sizes = s.sizes
	fmt.Printf("bench: rows %s, %d rounds, scale %g, %d nodes; load average %s\n",
		strings.Join(s.rows, ","), s.repeat, s.scale, s.nodes, rep.Machine.LoadStart)

	// The real node only for the row that measures it (the bench places
	// pods on the kwok nodes alone, round robin).
	if os.Getenv("DECKHAND_REAL_NODE") == "" && !s.has("incidents") {
		t.Setenv("DECKHAND_REAL_NODE", "false")
	}
	c, err := cluster.Start(fmt.Sprintf("deckhand-bench-%d", os.Getpid()), s.nodes)
	if err != nil {
		t.Fatalf("starting the cluster: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Stop(); err != nil {
			t.Errorf("removing the cluster: %v", err)
		}
	})
	b := &bench{t: t, c: c, s: s, rep: rep, ctx: context.Background(), bin: os.Getenv("DECKHAND_BIN")}
	if b.bin == "" {
		root, err := testenv.RepoRoot()
		if err != nil {
			t.Fatal(err)
		}
		b.bin = filepath.Join(root, "bin", "deckhand")
	}
	b.setup()

	// Speed rows share one manager; the memory row and the scale rows start
	// their own.
	if slices.ContainsFunc(s.rows, func(r string) bool { return r != "memory" && !strings.HasPrefix(r, "scale-") }) {
		b.mgr = b.startManager()
	}
	for _, row := range allRows {
		if !s.has(row) {
			continue
		}
		start := time.Now()
		fmt.Printf("bench: row %s ...\n", row)
		if run, ok := sharedManagerRows[row]; ok {
			run(b)
		} else {
			b.ownManagerRow(row)
		}
		fmt.Printf("bench: row %s done in %s\n", row, time.Since(start).Round(time.Second))
		// The table and the report so far, in case a later row fails the run.
		printTable(rep)
		writeJSON(t, rep)
	}
	rep.LoadEnd = loadAverage()
	printTable(rep)
	writeJSON(t, rep)
	for _, f := range rep.Figures {
		if f.Gate && f.Verdict != "PASS" {
			t.Errorf("BENCH REGRESSION: %s %s is %s %s, target %s", f.Row, f.Metric, format(f.Deckhand), f.Unit, f.Target)
		}
	}
}

// sharedManagerRows are the rows that run on the speed rows' one manager.
var sharedManagerRows = map[string]func(*bench){
	"podset": (*bench).podSetRow, "jobwatcher": (*bench).jobWatcherRow, "modelbox": (*bench).modelBoxRow,
	"podbugger": (*bench).podBuggerRow, "incidents": (*bench).incidentsRow, "crashloop": (*bench).crashLoopRow,
	"ceiling": (*bench).ceilingRow, "idle": (*bench).idleRow,
}

// ownManagerRow runs a row that starts managers of its own: the memory row
// and the scale rows.
func (b *bench) ownManagerRow(row string) {
	b.stopSharedManager()
	if row == "memory" {
		b.memoryRow()
		return
	}
	run, ok := scaleRows[row]
	if !ok {
		b.t.Fatalf("BENCH_ROWS: row %s is not in this build", row)
	}
	run(b)
}

// stopSharedManager stops the speed rows' manager, for a row that runs
// managers of its own (no two managers act on one cluster at once).
func (b *bench) stopSharedManager() {
	if b.mgr != nil {
		b.mgr.p.Stop()
		b.mgr = nil
	}
}

func printTable(rep *report) {
	fmt.Printf("\n| row | metric | N | Deckhand | alternative | ratio | target | verdict |\n|---|---|---|---|---|---|---|---|\n")
	for _, f := range rep.Figures {
		n := "—"
		if f.N > 0 {
			n = strconv.Itoa(f.N)
		}
		alt, ratio := "—", "—"
		if !math.IsNaN(f.Alternative) {
			alt = format(f.Alternative) + " " + f.Unit
			ratio = fmt.Sprintf("%.2f", f.Ratio)
		}
		target, verdict := f.Target, f.Verdict
		if target == "" {
			target, verdict = "—", "—"
		}
		if f.Gate {
			verdict += " (gate)"
		}
		fmt.Printf("| %s | %s | %s | %s %s | %s | %s | %s | %s |\n", f.Row, f.Metric, n, format(f.Deckhand), f.Unit, alt, ratio, target, verdict)
	}
	fmt.Printf("\nmachine: %s, %d cores, %s; load average %s at start, %s at end; commit %s\n",
		rep.Machine.CPU, rep.Machine.Cores, rep.Machine.MemTotal, rep.Machine.LoadStart, rep.LoadEnd, rep.Machine.Commit)
}

func format(v float64) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v == math.Trunc(v) && math.Abs(v) < 1e6:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	default:
		return strconv.FormatFloat(v, 'f', 2, 64)
	}
}

// writeJSON writes the report to bin/bench/bench-<time>.json and
// bin/bench/latest.json, so runs can be compared.
func writeJSON(t *testing.T, rep *report) {
	root, err := testenv.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, "bin", "bench")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// NaN is not JSON: an absent alternative is written as null.
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	name := filepath.Join(dir, "bench-"+rep.Started.Format("20060102-150405")+".json")
	for _, p := range []string{name, filepath.Join(dir, "latest.json")} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	fmt.Printf("bench: figures written to %s\n", name)
}

// MarshalJSON writes NaN as null.
func (f *figure) MarshalJSON() ([]byte, error) {
	type plain figure
	out := struct {
		*plain
		Deckhand    *float64 `json:"deckhand"`
		Alternative *float64 `json:"alternative"`
		Ratio       *float64 `json:"ratio"`
	}{plain: (*plain)(f), Deckhand: finite(f.Deckhand), Alternative: finite(f.Alternative), Ratio: finite(f.Ratio)}
	return json.Marshal(out)
}

func finite(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func describeMachine() machine {
	m := machine{Cores: runtime.NumCPU(), GoVersion: runtime.Version(), LoadStart: loadAverage()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "MemTotal:"); ok {
				m.MemTotal = strings.TrimSpace(v)
			}
		}
	}
	if out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output(); err == nil {
		m.Commit = strings.TrimSpace(string(out))
	}
	return m
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	return strings.Join(f[:3], " ")
}
