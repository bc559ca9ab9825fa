package incident

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// TestWrittenIncidentsStayFlatUnderChurn: tenants' pods fail, get
// records, and go, 20 rounds of 50, without the deletions ever being told
// (as when the cache stops holding a namespace); every third round the
// PodBugger goes too and a new one takes its place. After each periodic
// pass, the recorder keeps what it wrote only for the pods and PodBuggers
// that exist: as much after 20 rounds as after one.
func TestWrittenIncidentsStayFlatUnderChurn(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := errors.Join(clientgoscheme.AddToScheme(scheme), debugv1beta1.AddToScheme(scheme)); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme).Build()
	r := NewIncidentReconciler(c, c, nil, nil, 0, nil)
	const ns, perRound = "team-a", 50
	pb := func(round int) *debugv1beta1.PodBugger {
		return &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "recorder", UID: types.UID(fmt.Sprint("pb-", round/3))},
			Spec: debugv1beta1.PodBuggerSpec{Triggers: []debugv1beta1.Trigger{debugv1beta1.TriggerError}}}
	}
	current := pb(0)
	if err := c.Create(ctx, current); err != nil {
		t.Fatal(err)
	}
	held := func() int {
		r.written.mu.Lock()
		defer r.written.mu.Unlock()
		n := 0
		for _, recs := range r.written.byPod {
			n += len(recs)
		}
		for _, last := range r.written.last {
			n += len(last)
		}
		return n
	}
	after := make([]int, 0, 20)
	for round := range 20 {
		if next := pb(round); next.UID != current.UID {
			// The PodBugger is replaced: its delete is not told either.
			if err := c.Delete(ctx, current); err != nil {
				t.Fatal(err)
			}
			current = next
			if err := c.Create(ctx, current); err != nil {
				t.Fatal(err)
			}
		}
		for i := range perRound {
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d-%d", round, i), UID: types.UID(fmt.Sprintf("uid-%d-%d", round, i))}}
			if err := c.Create(ctx, pod); err != nil {
				t.Fatal(err)
			}
			inc := &debugv1beta1.PodIncident{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pod.Name + "-error",
				Labels: map[string]string{debugv1beta1.IncidentPodUIDLabel: string(pod.UID), debugv1beta1.IncidentPodBuggerUIDLabel: string(current.UID)}},
				Spec: debugv1beta1.PodIncidentSpec{Reason: debugv1beta1.IncidentError, Container: "app", Count: 1, LastTime: metav1.Now()}}
			r.written.remember(pod, inc)
		}
		// The pods of the round before went; nothing told the recorder.
		if round > 0 {
			for i := range perRound {
				if err := c.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("web-%d-%d", round-1, i)}}); err != nil {
					t.Fatal(err)
				}
			}
		}
		if err := r.pruneWritten(ctx); err != nil {
			t.Fatal(err)
		}
		after = append(after, held())
	}
	t.Logf("entries kept after each round: %v", after)
	for round, n := range after {
		if n > 2*perRound {
			t.Fatalf("after round %d the recorder keeps %d entries for %d pods that exist", round, n, perRound)
		}
	}
	if err := c.Delete(ctx, current); err != nil {
		t.Fatal(err)
	}
	if err := r.pruneWritten(ctx); err != nil {
		t.Fatal(err)
	}
	if n := held(); n != 0 {
		t.Fatalf("with no PodBugger left, the recorder keeps %d entries", n)
	}
}

// A pod failing for days opens a record per backoff window; the recorder
// keeps the latest record of each reason and container, and when each
// family (a container's crashes, whatever their reason) last failed: a few
// entries, not one per window.
func TestWrittenIncidentsKeepALongFailingPodsLatestRecordOnly(t *testing.T) {
	r := NewIncidentReconciler(nil, notFoundReader{}, nil, nil, 0, nil)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web", UID: "uid-web"}}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for window := range 200 {
		for _, reason := range []debugv1beta1.IncidentReason{debugv1beta1.IncidentError, debugv1beta1.IncidentOOMKilled} {
			r.written.remember(pod, &debugv1beta1.PodIncident{
				ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: fmt.Sprintf("web-%s-%d", strings.ToLower(string(reason)), window),
					Labels: map[string]string{debugv1beta1.IncidentPodUIDLabel: "uid-web", debugv1beta1.IncidentPodBuggerUIDLabel: "pb"}},
				Spec: debugv1beta1.PodIncidentSpec{Reason: reason, Container: "app", Count: 1,
					LastTime: metav1.NewTime(start.Add(time.Duration(window) * time.Hour))}})
		}
	}
	key := client.ObjectKeyFromObject(pod)
	if n, last := len(r.written.byPod[key]), len(r.written.last[key]); n != 2 || last != 1 {
		t.Errorf("after 200 backoff windows of two reasons the recorder keeps %d records and %d last times for the pod, want 2 and 1", n, last)
	}
}
