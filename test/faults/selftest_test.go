//go:build faults

package faults_test

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"

	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/internal/testenv/faultinject"
)

// The cache faults are real: a flaky watch from a resourceVersion is
// either refused as too old or cut short.
func TestFlakyWatchesBreakWatches(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	flaky := kubernetes.NewForConfigOrDie(faultinject.FlakyWatches(env.Config, watchCut))
	list, err := flaky.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var refused, cut int
	for range 2 {
		w, err := flaky.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			refused++
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		// Nothing changes in ns: the stream ends only when it is cut (after
		// an Error event saying why).
		deadline := time.After(testenv.Timeout)
	drain:
		for {
			select {
			case _, open := <-w.ResultChan():
				if !open {
					cut++
					break drain
				}
			case <-deadline:
				t.Error("a flaky watch was not cut")
				break drain
			}
		}
		w.Stop()
	}
	if refused != 1 || cut != 1 {
		t.Errorf("of 2 watches, %d were refused as too old and %d cut; want 1 and 1", refused, cut)
	}
}

// A lagging watch delivers an event no sooner than the lag after the
// change.
func TestLaggingWatchesDelayEvents(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	lagging := kubernetes.NewForConfigOrDie(faultinject.LaggingWatches(env.Config, cacheLag))
	list, err := lagging.CoreV1().ConfigMaps(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := lagging.CoreV1().ConfigMaps(ns).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	created := time.Now()
	env.Create(t, newConfigMap(ns))
	<-w.ResultChan()
	if seen := time.Since(created); seen < cacheLag {
		t.Errorf("the event arrived %s after the change, before the lag of %s", seen, cacheLag)
	}
}

func newConfigMap(ns string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "probe"}}
}

// The leak check sees a goroutine started after the snapshot that is still
// running, and not one that ended.
func TestLeakCheckCatchesALeakedGoroutine(t *testing.T) {
	g := snapshotGoroutines()
	release := make(chan struct{})
	ended := make(chan struct{})
	go func() {
		defer close(ended)
		<-release
	}()
	err := g.leaked(200 * time.Millisecond)
	close(release)
	<-ended
	if err == nil || !strings.Contains(err.Error(), "TestLeakCheckCatchesALeakedGoroutine") {
		t.Errorf("a goroutine blocked on a channel was not reported as leaked: %v", err)
	}
	if err := g.leaked(leakSettle); err != nil {
		t.Errorf("a goroutine that ended was reported as leaked: %v", err)
	}
}

// The allow-list check reports a container whose image no pattern allows
// and one in the opted-out namespace, and nothing for an allowed one.
func TestAllowListCheckCatchesOffListImagesAndOptedOutNamespaces(t *testing.T) {
	f := &fixture{t: t}
	check := allowListChecks(f, allowedNow, "off")
	carrier := func(ns, uid, image string) watch.Event {
		return watch.Event{Type: watch.Modified, Object: &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", UID: types.UID(uid)},
			Spec: corev1.PodSpec{EphemeralContainers: []corev1.EphemeralContainer{{
				EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "dbg", Image: image}}}}}}
	}
	check(carrier("on", "1", newImage))
	if len(f.violations) != 0 {
		t.Fatalf("an allowed image in an opted-in namespace was reported: %v", f.violations)
	}
	check(carrier("on", "2", offListImage))
	check(carrier("on", "3", legacyImage))
	check(carrier("off", "4", newImage))
	got := make([]string, 0, len(f.violations))
	for _, v := range f.violations {
		got = append(got, v.check)
	}
	want := []string{checkPodBuggerAllowList, checkPodBuggerAllowList, checkPodBuggerNamespace}
	if !slices.Equal(got, want) {
		t.Errorf("violations %v, want %v", f.violations, want)
	}
}

// The ModelBox's foreign-object check reports any change to a user's
// object after it was first seen, and ignores the ModelBox's own children.
func TestForeignCheckCatchesAWriteToAUsersObject(t *testing.T) {
	f := &fixture{t: t}
	check := foreignChecks(f, map[types.UID]bool{"user": true}, "services")
	obj := func(uid types.UID) *metav1.PartialObjectMetadata {
		return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "model", UID: uid}}
	}
	check(watch.Event{Type: watch.Added, Object: obj("user")})
	check(watch.Event{Type: watch.Modified, Object: obj("child")})
	check(watch.Event{Type: watch.Deleted, Object: obj("child")})
	if len(f.violations) != 0 {
		t.Fatalf("the ModelBox's own child or a user's object as it was made was reported: %v", f.violations)
	}
	check(watch.Event{Type: watch.Modified, Object: obj("user")})
	check(watch.Event{Type: watch.Deleted, Object: obj("user")})
	if len(f.violations) != 2 || f.violations[0].check != checkModelBoxForeign {
		t.Errorf("violations %v, want 2 of %q", f.violations, checkModelBoxForeign)
	}
}
