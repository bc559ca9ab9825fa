package podbugger

import (
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestRefusalsAreRetriedWithBackoffAFewTimes(t *testing.T) {
	start := time.Unix(1000, 0)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-a", UID: "ua"}}
	key := types.NamespacedName{Namespace: "ns", Name: "dbg"}
	m := newMemory()
	pm := m.of(key, 1, nil)

	now := start
	for attempt := 1; attempt <= maxAttempts; attempt++ {
		if pm.passOver(now)["ua"] {
			t.Fatalf("attempt %d: the pod should be due at %s", attempt, now.Sub(start))
		}
		pm.refuse(pod, errors.New("forbidden"), now)
		if !pm.passOver(now)["ua"] || !pm.passOver(now.Add(retryDelay(attempt) - time.Second))["ua"] {
			t.Fatalf("attempt %d: the pod should wait %s", attempt, retryDelay(attempt))
		}
		if attempt < maxAttempts && pm.nextRetry(now) != retryDelay(attempt) {
			t.Errorf("attempt %d: next retry in %s, want %s", attempt, pm.nextRetry(now), retryDelay(attempt))
		}
		now = now.Add(retryDelay(attempt))
	}
	if !pm.passOver(now.Add(24 * time.Hour))["ua"] || pm.nextRetry(now) != 0 {
		t.Errorf("after %d attempts the pod is left alone", maxAttempts)
	}
	if got := pm.refusals(); len(got) != 1 || got[0].attempts != maxAttempts || got[0].pod != "web-a" {
		t.Errorf("refusals = %+v", got)
	}

	// A new generation, or new namespace labels, start afresh.
	if m.of(key, 1, nil) != pm {
		t.Error("the same generation and labels keep the memory")
	}
	if len(m.of(key, 2, nil).refused) != 0 || len(m.of(key, 2, map[string]string{"pod-security.kubernetes.io/enforce": "baseline"}).refused) != 0 {
		t.Error("a new generation or namespace labels forget the refusals")
	}
}

func TestSkipsAreReportedOncePerPod(t *testing.T) {
	pm := newMemory().of(types.NamespacedName{Name: "dbg"}, 1, nil)
	a := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "a", UID: "ua"}}
	if !pm.firstSkip(a, EventTargetContainerNotFound) || pm.firstSkip(a, EventTargetContainerNotFound) {
		t.Error("a skip is news once")
	}
	if !pm.firstSkip(a, EventContainerNameTaken) {
		t.Error("another reason is news")
	}
	pm.prune(nil)
	if !pm.firstSkip(a, EventContainerNameTaken) {
		t.Error("a pod that went is forgotten")
	}
}
