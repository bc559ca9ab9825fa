//go:build faults

package faults_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// checkNoGoroutineLeak: once a run's managers are stopped, the goroutines
// of the process are those it had before the run.
const checkNoGoroutineLeak = "no goroutine leak"

// leakSettle is how long the goroutines of stopped managers may take to
// end: a watch's last read, a lagging watch's last delayed chunk.
const leakSettle = 5 * time.Second

// longLived are the goroutines that outlive any one run by design, named:
// the HTTP/2 connections client-go keeps open and shares between clients of
// one configuration (its transport cache), which the test's own clients and
// the next run reuse. And one known leak, not Deckhand's: controller-runtime's
// multi-namespace informer, and each handler registered on it, waits in a
// goroutine of its own for its informers (handlers) to sync, and one stopped
// before it synced (the scoped cache drops an informer that cannot sync
// within its keep time: an apiserver outage) never does, so that goroutine
// never ends (controller-runtime v0.25.2, pkg/cache/multi_namespace_cache.go,
// newMultiNamespaceInformer and newMultiNamespaceInformerHandlerRegistration):
// one per informer and handler dropped unsynced, seen in the outage scenario
// (docs/development/fault-suite.md).
// Nothing else is ignored.
var longLived = []goleak.Option{
	goleak.IgnoreAnyFunction("sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformer.func1"),
	goleak.IgnoreAnyFunction("sigs.k8s.io/controller-runtime/pkg/cache.newMultiNamespaceInformerHandlerRegistration.func1"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).readLoop"),
	goleak.IgnoreAnyFunction("net/http.(*persistConn).writeLoop"),
	goleak.IgnoreAnyFunction("net/http.(*http2ClientConn).readLoop"),
	goleak.IgnoreAnyFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
}

// goroutines is a snapshot of the goroutines running now, to compare with
// later through leaked.
type goroutines struct{ before goleak.Option }

func snapshotGoroutines() goroutines { return goroutines{before: goleak.IgnoreCurrent()} }

// leaked waits up to settle for the goroutines started since the snapshot
// to end, and returns those that did not (nil if none).
func (g goroutines) leaked(settle time.Duration) error {
	deadline := time.Now().Add(settle)
	for {
		err := goleak.Find(append([]goleak.Option{g.before}, longLived...)...)
		if err == nil || time.Now().After(deadline) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// background holds the stop functions of what a run starts beside its
// managers (observers, the simulated kubelet), per test, so that the run
// can stop them before it looks for leaked goroutines, not only when the
// test ends.
var background = struct {
	sync.Mutex
	stops map[testing.TB][]func()
}{stops: map[testing.TB][]func(){}}

// inBackground registers stop, to be called once: by stopBackground or when
// the test ends.
func inBackground(t testing.TB, stop func()) {
	var once sync.Once
	stopOnce := func() { once.Do(stop) }
	background.Lock()
	background.stops[t] = append(background.stops[t], stopOnce)
	background.Unlock()
	t.Cleanup(stopOnce)
}

// stopBackground stops what t started in the background, the latest first.
func stopBackground(t testing.TB) {
	background.Lock()
	stops := background.stops[t]
	delete(background.stops, t)
	background.Unlock()
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
}

// checkLeaks records a violation of checkNoGoroutineLeak if goroutines
// started since g are still running.
func checkLeaks(f *fixture, g goroutines) {
	if err := g.leaked(leakSettle); err != nil {
		f.violate(checkNoGoroutineLeak, "%s after the managers stopped: %v", leakSettle, summarize(err))
	}
}

// summarize keeps a leak report readable in the table's VIOLATION lines.
func summarize(err error) string {
	s := err.Error()
	if len(s) > 4000 {
		return fmt.Sprintf("%s… (%d more bytes)", s[:4000], len(s)-4000)
	}
	return s
}
