package scopedcache

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Scripted switches over the fake apiserver (fakeapi_test.go): each the
// moment one defect of the handover needs, which the randomized schedules
// reach only by chance.

// newScript is a running cache of pods over a fake apiserver holding
// pods[namespace] pods in each namespace, needing needs, with one handler.
func newScript(t *testing.T, pods map[string]int, needs []string, expand func(client.Object) (client.Object, bool)) *schedule {
	t.Helper()
	return newScriptWith(t, Options{}, pods, needs, expand)
}

// newScriptWith is newScript with a cache of these options (KeepFor
// 200 ms when zero).
func newScriptWith(t *testing.T, o Options, pods map[string]int, needs []string, expand func(client.Object) (client.Object, bool)) *schedule {
	t.Helper()
	quietKlog(t)
	s := &schedule{rng: rand.New(rand.NewPCG(1, 1)), api: newFakeAPI(), need: map[string]bool{}, logf: t.Logf,
		readErrs: make(chan string, 16), options: o}
	for ns, n := range pods {
		for i := range n {
			s.api.write(ns, fmt.Sprintf("p%d", i), false)
		}
	}
	for _, ns := range needs {
		s.need[ns] = true
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	s.ledgers = nil
	if err := s.startCache(ctx, expand); err != nil {
		t.Fatal(err)
	}
	s.eventually(t, "the handler is told what the apiserver holds", s.converged)
	return s
}

// needFirst needs ns-00 … ns-(n-1), and nothing else.
func (s *schedule) needFirst(n int) {
	clear(s.need)
	for i := range n {
		s.need[nsName(i)] = true
	}
	s.publishNeeds()
	s.k.pokeRun()
}

func (s *schedule) eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		s.k.pokeRun()
		time.Sleep(10 * time.Millisecond)
	}
}

// handedToAll is nil once the cluster-wide space tells namespace.
func (s *schedule) handedToAll(namespace string) func() error { //nolint:unparam // the scripted tests hand ns-00 over today
	return func() error {
		s.k.mu.Lock()
		all := s.k.spaces[allNamespaces]
		s.k.mu.Unlock()
		if all == nil || s.k.ownerOf(namespace) != all {
			return fmt.Errorf("%s is not told by the cluster-wide space yet", namespace)
		}
		return nil
	}
}

// Pods deleted while their namespace's own informer could not watch (an
// outage only it saw), then the namespace handed to the cluster-wide
// informer, which listed after the deletions: the handler is told them
// deleted. The namespace is empty, so no object the new informer holds
// says it has seen past them.
func TestADeletionTheOldSpaceMissedIsTold(t *testing.T) {
	s := newScript(t, map[string]int{"ns-00": 3}, []string{"ns-00"}, nil)
	s.api.refuse("ns-00", true)
	for i := range 3 {
		s.api.write("ns-00", fmt.Sprintf("p%d", i), true)
	}
	s.needFirst(ClusterWideAbove + 1)
	s.eventually(t, "the switch", s.handedToAll("ns-00"))
	s.eventually(t, "after the switch", s.converged)
}

// Pods the handler was never told (made while their namespace's own
// informer could not watch) are told by the handover as the initial list
// they are: a handler that does work per non-initial Add (JobWatcher's
// history, under its delivery lock) does it once.
func TestAHandoverTellsWhatWasNeverToldAsTheInitialList(t *testing.T) {
	s := newScript(t, map[string]int{"ns-00": 1}, []string{"ns-00"}, nil)
	s.api.refuse("ns-00", true)
	for i := 1; i <= 5; i++ {
		s.api.write("ns-00", fmt.Sprintf("p%d", i), false)
	}
	s.needFirst(ClusterWideAbove + 1)
	s.eventually(t, "the switch", s.handedToAll("ns-00"))
	s.eventually(t, "after the switch", s.converged)
	l := s.ledgers[0]
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := 1; i <= 5; i++ {
		key := fmt.Sprintf("ns-00/p%d", i)
		if h := l.history[key]; len(h) != 1 || !strings.HasPrefix(h[0], "added (initial)") {
			t.Errorf("%s was told %v by the handover, not as an initial Add", key, h)
		}
	}
}

// gate is a handler that holds its delivery of one pod until released:
// every delivery waits behind it, and so does a handover.
type gate struct {
	key      string
	reached  chan struct{}
	release  chan struct{}
	reachOne sync.Once
}

func (g *gate) hold(obj any) {
	if o, ok := obj.(client.Object); ok && o.GetNamespace()+"/"+o.GetName() == g.key {
		g.reachOne.Do(func() { close(g.reached) })
		<-g.release
	}
}

func (g *gate) OnAdd(obj any, _ bool) { g.hold(obj) }
func (g *gate) OnUpdate(_, obj any)   { g.hold(obj) }
func (g *gate) OnDelete(any)          {}

// While the cluster-wide informer has synced but not yet been handed a
// namespace (a handler still works on an event), a read of the namespace
// is answered by the informer whose events the handlers are told.
func TestReadsMoveWithDeliveries(t *testing.T) {
	s := newScript(t, map[string]int{"ns-00": 2, "ns-01": 1}, []string{"ns-00", "ns-01"}, nil)
	g := &gate{key: "ns-01/gate", reached: make(chan struct{}), release: make(chan struct{})}
	if _, err := s.k.informer.AddEventHandler(g); err != nil {
		t.Fatal(err)
	}
	released := atomic.Bool{}
	defer func() {
		if !released.Load() {
			close(g.release)
		}
	}()
	s.api.write("ns-01", "gate", false)
	<-g.reached
	s.needFirst(ClusterWideAbove + 1)
	s.eventually(t, "the cluster-wide informer syncs", func() error {
		s.k.mu.Lock()
		defer s.k.mu.Unlock()
		if all := s.k.spaces[allNamespaces]; all == nil || !isClosed(all.synced) {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var pods corev1.PodList
	if err := s.c.List(ctx, &pods, client.InNamespace("ns-00")); err != nil {
		t.Fatal(err)
	}
	select {
	case msg := <-s.readErrs:
		t.Error(msg)
	default:
	}
	released.Store(true)
	close(g.release)
	s.eventually(t, "the switch", s.handedToAll("ns-00"))
}

// A switch records what handlers were told as names and versions, and
// expands an object only to tell it: handing over a namespace of 300 pods
// handlers were all told expands none (it expanded each twice, under the
// kind's lock: some 165 MB at 50,000 pods).
func TestASwitchExpandsOnlyWhatItTells(t *testing.T) {
	var counting atomic.Bool
	var expanded atomic.Int64
	expand := func(o client.Object) (client.Object, bool) {
		p, ok := o.(*corev1.Pod)
		if !ok {
			return nil, false
		}
		if counting.Load() && p.Namespace == "ns-00" {
			expanded.Add(1)
		}
		return p.DeepCopy(), true
	}
	s := newScript(t, map[string]int{"ns-00": 300}, []string{"ns-00"}, expand)
	counting.Store(true)
	s.needFirst(ClusterWideAbove + 1)
	s.eventually(t, "the switch", s.handedToAll("ns-00"))
	s.eventually(t, "after the switch", s.converged)
	if n := expanded.Load(); n >= 300 {
		t.Errorf("handing over 300 pods every handler was told expanded %d pods", n)
	}
}

var _ toolscache.ResourceEventHandler = &gate{}
