//go:build faults

// Package faults_test drives each controller through its scenarios against a
// real apiserver (envtest) while injecting faults, and checks named
// invariants continuously: see docs/development/fault-suite.md. Run it with
// `make test-faults`.
package faults_test

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"text/tabwriter"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

var env *testenv.Env

// cs is a clientset for the observers' watches, as a cluster admin.
var cs kubernetes.Interface

func TestMain(m *testing.M) {
	// A crashed manager's refused writes make every controller log errors:
	// noise unless asked for, so the managers' logs go to a file.
	if os.Getenv("DECKHAND_TEST_VERBOSE") == "" {
		path := filepath.Join(os.TempDir(), "deckhand-faults.log")
		if f, err := os.Create(path); err == nil {
			fmt.Printf("fault injection: manager logs in %s\n", path)
			os.Stderr = f
		}
	}
	testenv.Main(m, &env)
}

const (
	// quiet is how long a manager must make no write, with its scenario's
	// end state reached, for a run to count as finished: longer than the
	// JobWatcher status controller's coalescing interval (1 s).
	quiet = 2 * time.Second
	// maxCrashPoints bounds the exploration of one scenario: a controller
	// that still writes after this many writes is in a hot loop.
	maxCrashPoints = 80
	// shortCrashPoints is how many crash points of each scenario `go test
	// -short` (make test) explores, the first ones, besides the stale-cache
	// run: a bounded subset, about a minute and a half.
	shortCrashPoints = 2
	// cacheLag is how far behind the apiserver a stale cache is.
	cacheLag = 500 * time.Millisecond
	// watchCut is how long a flaky watch stream lasts.
	watchCut = 300 * time.Millisecond
	// settleTimeout bounds how long a scenario may take to reach its end
	// state, from the trigger or from a restart after a crash.
	settleTimeout = 2 * testenv.Timeout
)

// scenario is one thing a controller does, as a test drives it.
type scenario struct {
	name string
	// controllers are the manager's --controllers.
	controllers []string
	// staleCrashes explores the crash points once more with every manager
	// on a stale cache: for the controllers that count what they created
	// (PodSet's expectations, PodBugger's carriers).
	staleCrashes bool
	// crashPoints, when not zero, bounds the crash points explored: for a
	// scenario whose many writes are alike (a scale-up's pod creations),
	// where exploring each would take many minutes and teach nothing new.
	crashPoints int
	// costly scenarios run only their stale-cache run under -short (make
	// test): each run takes tens of seconds, and make test's share of the
	// suite stays within a minute and a half.
	costly bool
	// start prepares a run in a namespace of its own (the world before the
	// change, reached with a plain manager if need be, and the observers
	// that check the invariants) and returns its plan.
	start func(t *testing.T, f *fixture) plan
}

// plan is one run of a scenario.
type plan struct {
	// trigger are the test's own writes that start the change, made while
	// the faulty manager runs; each step is retried until it succeeds (a
	// webhook is down while a crashed manager restarts), so a step must
	// tolerate having succeeded before.
	trigger []func() error
	// converged is nil once the scenario's end state holds, or says what
	// is missing.
	converged func() error
	// final checks what can only be checked at the end, through f.violate.
	final func()
	// wrap, if set, is a fault of the scenario's own on every manager's
	// connection (an apiserver outage), under the run's.
	wrap func(*rest.Config) *rest.Config
	// started, if set, is given every manager of the run as it starts (to
	// add a checking handler to its cache).
	started func(ctrl.Manager)
}

// fixture is what one run shares between the driver and the scenario.
type fixture struct {
	t    *testing.T
	opts manager.Options

	mu         sync.Mutex
	violations []violation
}

// violate records that check was broken; the same check and detail once.
func (f *fixture) violate(check, format string, args ...any) {
	v := violation{check: check, detail: fmt.Sprintf(format, args...)}
	f.mu.Lock()
	defer f.mu.Unlock()
	if !slices.Contains(f.violations, v) {
		f.violations = append(f.violations, v)
	}
}

// startPlain runs a manager with the scenario's controllers and no fault,
// until stop is called or the test ends.
func (f *fixture) startPlain() (stop func()) {
	_, stop = env.StartManager(f.t, f.opts)
	return stop
}

// result is one row of the table.
type result struct {
	scenario, faults string
	points           int
	violations       []violation
	took             time.Duration
}

var (
	resultsMu sync.Mutex
	results   []result
)

func record(r result) {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	results = append(results, r)
}

// printTable prints the table of every scenario run so far, and writes it
// to the file $FAULTS_TABLE names, if any.
func printTable() {
	resultsMu.Lock()
	defer resultsMu.Unlock()
	var out io.Writer = os.Stdout
	if path := os.Getenv("FAULTS_TABLE"); path != "" {
		if f, err := os.Create(path); err == nil {
			defer func() { _ = f.Close() }()
			out = io.MultiWriter(os.Stdout, f)
		}
	}
	w := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "SCENARIO\tFAULTS\tCRASH POINTS\tVIOLATIONS\tTIME")
	for _, r := range results {
		_, _ = fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%s\n", r.scenario, r.faults, r.points, len(r.violations), r.took.Round(time.Second))
	}
	_ = w.Flush()
	for _, r := range results {
		for _, v := range r.violations {
			_, _ = fmt.Fprintf(out, "VIOLATION %s: %s\n", r.scenario, v)
		}
	}
}

// crashAfterEveryWrite runs sc once per crash point: for k = 1, 2, … the
// manager is killed right after its k-th write, a fresh one (new cache, new
// expectations, new memory) takes over, and the scenario must reach its end
// state with every invariant held; until a run finishes with fewer than k
// writes, so that every crash point is explored.
func crashAfterEveryWrite(t *testing.T, sc scenario, cf cacheFault) {
	began := time.Now()
	r := result{scenario: sc.name, faults: "crash after every write"}
	if cf.name != "" {
		r.faults += ", " + cf.name
	}
	for k := 1; ; k++ {
		if testing.Short() && k > shortCrashPoints || sc.crashPoints > 0 && k > sc.crashPoints {
			r.points = k - 1
			break
		}
		if k > maxCrashPoints {
			r.violations = append(r.violations, violation{"no hot loop", fmt.Sprintf("still writing after %d writes", maxCrashPoints)})
			break
		}
		var finished bool
		t.Run(fmt.Sprintf("crash after write %d", k), func(t *testing.T) {
			vs, writes, crashed := crashAt(t, sc, k, cf)
			for _, v := range vs {
				t.Errorf("violated: %s", v)
			}
			r.violations = append(r.violations, vs...)
			finished = !crashed && writes < k
			if !crashed {
				t.Logf("finished with %d writes, no crash", writes)
			}
		})
		if finished {
			r.points = k - 1
			break
		}
	}
	r.took = time.Since(began)
	record(r)
}

// cacheFault is a fault of the manager's cache, injected at its watches.
type cacheFault struct {
	name string
	wrap func(*rest.Config) *rest.Config
}

// staleCache delays every watch event by cacheLag.
var staleCache = cacheFault{name: fmt.Sprintf("cache %s behind", cacheLag),
	wrap: func(cfg *rest.Config) *rest.Config { return faultinject.LaggingWatches(cfg, cacheLag) }}

// flakyWatches cuts every watch stream after watchCut, and refuses every
// other watch as too old, forcing relists.
var flakyWatches = cacheFault{name: "watches cut, relists forced",
	wrap: func(cfg *rest.Config) *rest.Config { return faultinject.FlakyWatches(cfg, watchCut) }}

// withCacheFault runs sc once, without a crash, on a manager whose cache
// suffers cf.
func withCacheFault(t *testing.T, sc scenario, cf cacheFault) {
	began := time.Now()
	r := result{scenario: sc.name, faults: cf.name}
	vs, writes, _ := crashAt(t, sc, 0, cf)
	for _, v := range vs {
		t.Errorf("violated: %s", v)
	}
	t.Logf("finished with %d writes", writes)
	r.violations, r.took = vs, time.Since(began)
	record(r)
}

// crashAt runs sc with a crash after the manager's k-th write (none when k
// is 0), on a cache that suffers cf (if any). It returns the violations
// seen, how many writes the faulty manager made and whether it crashed.
func crashAt(t *testing.T, sc scenario, k int, cf cacheFault) ([]violation, int, bool) {
	goroutinesBefore := snapshotGoroutines()
	f := &fixture{t: t, opts: env.ManagerOptions()}
	f.opts.Controllers = sc.controllers
	p := sc.start(t, f)
	panicsBefore := reconcilePanics(t)

	config := func(cp *faultinject.CrashPoint) *rest.Config {
		cfg := env.Config
		if p.wrap != nil {
			cfg = p.wrap(cfg)
		}
		cfg = cp.Config(cfg)
		if cf.wrap != nil {
			cfg = cf.wrap(cfg)
		}
		return cfg
	}
	cp := faultinject.NewCrashPoint(k)
	mgr, stop := env.StartManagerWithConfig(t, config(cp), f.opts)
	if p.started != nil {
		p.started(mgr)
	}
	triggered := make(chan struct{})
	go func() {
		defer close(triggered)
		for _, step := range p.trigger {
			deadline := time.Now().Add(settleTimeout)
			for err := step(); err != nil; err = step() {
				if !transient(err) || time.Now().After(deadline) {
					f.violate("trigger", "the test's own write kept failing: %v", err)
					return
				}
				time.Sleep(50 * time.Millisecond)
			}
		}
	}()
	crashed := settle(f, cp, p, triggered)
	writes := cp.Writes()
	if crashed {
		stop()
		// A fresh manager: new cache, new expectations, new memory.
		recovery := faultinject.NewCrashPoint(0)
		mgr, stop = env.StartManagerWithConfig(t, config(recovery), f.opts)
		if p.started != nil {
			p.started(mgr)
		}
		if settle(f, recovery, p, triggered) {
			t.Fatal("a manager without a crash point crashed")
		}
	}
	<-triggered
	p.final()
	stop()
	stopBackground(t)
	checkLeaks(f, goroutinesBefore)
	if n := reconcilePanics(t) - panicsBefore; n > 0 {
		f.violate("no panic", "%v reconciles panicked (controller-runtime recovered them)", n)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.violations), writes, crashed
}

// settle waits until cp's manager crashes (true), or the trigger is done,
// the end state holds and the manager has made no write for a while
// (false). A scenario that does not reach its end state in time is a
// violation of its convergence.
func settle(f *fixture, cp *faultinject.CrashPoint, p plan, triggered <-chan struct{}) bool {
	deadline := time.Now().Add(settleTimeout)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		select {
		case <-cp.Crashed():
			return true
		case <-tick.C:
		}
		select {
		case <-triggered:
			if last = p.converged(); last == nil && cp.QuietFor(quiet) {
				return false
			}
		default:
			last = errors.New("the trigger has not gone through")
		}
		if time.Now().After(deadline) {
			f.violate("converges", "after %s: %v", settleTimeout, last)
			return false
		}
	}
}

// waitFor polls cond until it is nil, and fails the test if it is not in
// time: for the world a scenario starts from, not for an invariant.
func waitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(testenv.Timeout)
	for err := cond(); err != nil; err = cond() {
		if time.Now().After(deadline) {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// reconcilePanics is how many reconciles of the managers in this process
// panicked so far.
func reconcilePanics(t *testing.T) float64 {
	n, err := testenv.Metric("controller_runtime_reconcile_panics_total", nil)
	if err != nil {
		t.Fatalf("reading the reconcile panics: %v", err)
	}
	return n
}

// transient reports whether a write may succeed when retried: the
// webhook server is down while a crashed manager restarts, or the object
// changed meanwhile.
func transient(err error) bool {
	var status apierrors.APIStatus
	if !errors.As(err, &status) {
		return true // not an answer from the apiserver: a connection
	}
	return apierrors.IsInternalError(err) || apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServerTimeout(err) || apierrors.IsConflict(err) || apierrors.IsTooManyRequests(err)
}

// ignoreExists makes a create retried after it succeeded a success.
func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// kindScenarios are, per controller of the registry (its --controllers
// name), the scenarios of what it does; each kind's file adds its own with
// scenariosOf in an init function, and TestFaults fails naming a controller
// of the registry that has none, so a new kind's scenarios cannot be left
// out of the run.
var kindScenarios = map[string]func() []scenario{}

// scenariosOf registers the scenarios of the controller named controller.
func scenariosOf(controller string, scenarios func() []scenario) {
	if _, dup := kindScenarios[controller]; dup {
		panic("fault scenarios of " + controller + " registered twice")
	}
	kindScenarios[controller] = scenarios
}

// allScenarios are the scenarios of every controller of the registry, in
// its order, then those of the fault classes that span controllers; an
// error names each controller without scenarios, and each registered name
// the registry does not know.
func allScenarios() ([]scenario, error) {
	var out []scenario
	var errs []error
	known := manager.KnownControllers()
	for _, name := range known {
		scenarios, ok := kindScenarios[name]
		if !ok {
			errs = append(errs, fmt.Errorf("controller %q of the registry has no fault scenarios: register them with scenariosOf", name))
			continue
		}
		out = append(out, scenarios()...)
	}
	for name := range kindScenarios {
		if !slices.Contains(known, name) {
			errs = append(errs, fmt.Errorf("fault scenarios registered for %q, which the registry does not know", name))
		}
	}
	return append(out, faultClassScenarios()...), errors.Join(errs...)
}

func TestFaults(t *testing.T) {
	cs = kubernetes.NewForConfigOrDie(env.Config)
	t.Cleanup(printTable)
	scenarios, err := allScenarios()
	if err != nil {
		t.Fatal(err)
	}
	for _, sc := range scenarios {
		if filter := os.Getenv("FAULTS_SCENARIO"); filter != "" && !strings.Contains(sc.name, filter) {
			continue
		}
		t.Run(sc.name, func(t *testing.T) {
			all := !sc.costly || !testing.Short()
			if all {
				t.Run("crash after every write", func(t *testing.T) { crashAfterEveryWrite(t, sc, cacheFault{}) })
			}
			t.Run("stale cache", func(t *testing.T) { withCacheFault(t, sc, staleCache) })
			if all {
				t.Run("flaky watches", func(t *testing.T) { withCacheFault(t, sc, flakyWatches) })
			}
			if sc.staleCrashes && !testing.Short() {
				t.Run("crash after every write on a stale cache", func(t *testing.T) { crashAfterEveryWrite(t, sc, staleCache) })
			}
		})
	}
	t.Run("second status writer", secondStatusWriter)
}
