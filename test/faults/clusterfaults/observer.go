package clusterfaults

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
)

// The invariants, named as in test/faults.
const (
	CheckBound     = "never more than size (+maxSurge in a rollout) live pods"
	CheckForeign   = "never deletes a pod it does not own"
	CheckAdoption  = "never takes a pod another controller owns or its selector does not match"
	CheckConverges = "converges to exactly size"
	CheckAlive     = "the manager keeps running and recovers on its own"
)

// Violation is one invariant broken: the check's name and what was seen.
type Violation struct{ Check, Detail string }

func (v Violation) String() string { return v.Check + ": " + v.Detail }

// observer follows every pod of a namespace from the test's own admin
// connection and checks the PodSet invariants on each event. A watch that
// cannot resume (the apiserver restarted and forgot the resourceVersion:
// 410 Gone) is replaced by a relist and a new watch; the relisted state is
// checked like an event, so only states that came and went entirely
// while no watch ran can be missed, and relists counts those gaps.
type observer struct {
	pods    kubernetes.Interface
	ns, set string
	// foreign are the pods the PodSet must leave alone, with the UID of
	// their controller (empty: none).
	foreign map[string]types.UID

	mu    sync.Mutex
	bound int
	// live maps each live pod of the PodSet to its image; target is the
	// image the waiters count.
	live       map[string]string
	target     string
	maxLive    int
	relists    int
	violations []Violation
	// waiters are closed once that many live pods run target.
	waiters map[int]chan struct{}
}

func newObserver(cs kubernetes.Interface, ns, set string, bound int, foreign map[string]types.UID) *observer {
	return &observer{pods: cs, ns: ns, set: set, bound: bound, foreign: foreign,
		live: map[string]string{}, waiters: map[int]chan struct{}{}}
}

// run observes until the test ends.
func (o *observer) run(t testing.TB) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for first := true; ctx.Err() == nil; first = false {
			if !first {
				o.mu.Lock()
				o.relists++
				o.mu.Unlock()
			}
			o.listAndWatch(ctx)
		}
	}()
	t.Cleanup(func() { cancel(); <-done })
}

// listAndWatch lists, then watches from the list until the watch cannot
// go on; it retries the list while the apiserver does not answer.
func (o *observer) listAndWatch(ctx context.Context) {
	pods := o.pods.CoreV1().Pods(o.ns)
	var list *corev1.PodList
	for {
		var err error
		if list, err = pods.List(ctx, metav1.ListOptions{}); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
	o.relisted(list.Items)
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return pods.Watch(ctx, opts)
		},
	})
	if err != nil {
		return
	}
	defer w.Stop()
	for ev := range w.ResultChan() {
		if pod, ok := ev.Object.(*corev1.Pod); ok {
			o.event(ev.Type, pod)
		}
		// An Error event is followed by the end of the stream (410) or a
		// resume: either way the loop goes on.
	}
}

// relisted replaces the observed state with a list's.
func (o *observer) relisted(pods []corev1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.live = map[string]string{}
	present := map[string]bool{}
	for i := range pods {
		present[pods[i].Name] = true
		o.checkLocked(watch.Added, &pods[i])
	}
	for name := range o.foreign {
		if !present[name] {
			o.violateLocked(CheckForeign, "pod %s is gone (seen on a relist)", name)
		}
	}
	o.countLocked()
}

func (o *observer) event(typ watch.EventType, pod *corev1.Pod) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.checkLocked(typ, pod)
	o.countLocked()
}

func (o *observer) checkLocked(typ watch.EventType, pod *corev1.Pod) {
	if owner, ok := o.foreign[pod.Name]; ok {
		if typ == watch.Deleted || pod.DeletionTimestamp != nil {
			o.violateLocked(CheckForeign, "pod %s was deleted", pod.Name)
		}
		if ref := metav1.GetControllerOf(pod); ref != nil && ref.UID != owner || ref == nil && owner != "" {
			o.violateLocked(CheckAdoption, "pod %s is now controlled by %v", pod.Name, ref)
		}
		return
	}
	if typ == watch.Deleted || !o.ownedLive(pod) {
		delete(o.live, pod.Name)
	} else {
		o.live[pod.Name] = pod.Spec.Containers[0].Image
	}
}

func (o *observer) countLocked() {
	n := len(o.live)
	o.maxLive = max(o.maxLive, n)
	if n > o.bound {
		o.violateLocked(CheckBound, "%d live pods, at most %d allowed", n, o.bound)
	}
	running := o.runningLocked()
	for at, ch := range o.waiters {
		if running >= at {
			close(ch)
			delete(o.waiters, at)
		}
	}
}

// ownedLive reports whether the PodSet controls pod and the pod counts
// towards its size: not being deleted, not finished.
func (o *observer) ownedLive(pod *corev1.Pod) bool {
	ref := metav1.GetControllerOf(pod)
	return ref != nil && ref.Kind == "PodSet" && ref.Name == o.set && pod.DeletionTimestamp == nil &&
		pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed
}

// violate records that check was broken; the same check and detail once.
func (o *observer) violate(check, format string, args ...any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.violateLocked(check, format, args...)
}

func (o *observer) violateLocked(check, format string, args ...any) {
	v := Violation{Check: check, Detail: fmt.Sprintf(format, args...)}
	if !slices.Contains(o.violations, v) {
		o.violations = append(o.violations, v)
	}
}

// runningLocked is how many live pods run target.
func (o *observer) runningLocked() int {
	n := 0
	for _, image := range o.live {
		if image == o.target {
			n++
		}
	}
	return n
}

// setTarget sets the image the waiters count.
func (o *observer) setTarget(image string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.target = image
}

// reached is closed once n live pods run the target image.
func (o *observer) reached(n int) <-chan struct{} {
	o.mu.Lock()
	defer o.mu.Unlock()
	ch := make(chan struct{})
	if o.runningLocked() >= n {
		close(ch)
	} else {
		o.waiters[n] = ch
	}
	return ch
}

// runningNow is how many live pods run the target image.
func (o *observer) runningNow() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.runningLocked()
}

// report returns the violations, the most live pods seen at once and how
// many times the watch had to be replaced by a relist.
func (o *observer) report() (vs []Violation, maxLive, relists int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.violations), o.maxLive, o.relists
}
