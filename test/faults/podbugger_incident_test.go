//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// The incident recorder's invariant: a crash is counted once, whatever the
// manager lost (its memory, a response, a fresh cache).
const checkIncidentOnce = "never two PodIncidents for one failure"

// podBuggerIncidentScenario: three pods of a namespace that never opted in
// each crashed once; the trigger creates a capture-only PodBugger. The end
// state is one record per pod counting one failure, however the manager
// crashed on the way.
func podBuggerIncidentScenario() scenario {
	return scenario{name: "PodBugger records 3 crashes once each", controllers: []string{"podbugger"},
		staleCrashes: true, start: podBuggerIncidentPlan}
}

func podBuggerIncidentPlan(t *testing.T, f *fixture) plan {
	ctx := context.Background()
	ns := env.Namespace(t)
	finished := metav1.NewTime(time.Now().Add(-5 * time.Second).Truncate(time.Second))
	for i := range 3 {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("crash-%d", i), Labels: map[string]string{"app": "web"}},
			Spec: podSpec()}
		env.Create(t, p)
		p.Status.Phase = corev1.PodRunning
		p.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "main", Image: "busybox:1", ImageID: "busybox",
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
				ContainerID: fmt.Sprintf("containerd://%d", i), FinishedAt: finished}}}}
		if err := env.Client.Status().Update(ctx, p); err != nil {
			t.Fatalf("crashing pod %s: %v", p.Name, err)
		}
	}
	perPod := map[string]map[string]bool{}
	var mu sync.Mutex
	observe(t, metadataList(debugv1beta1.GroupVersion.WithResource("podincidents"), ns), func(ev watch.Event) {
		mu.Lock()
		defer mu.Unlock()
		m, ok := ev.Object.(metav1.Object)
		if !ok {
			return
		}
		pod := m.GetLabels()[debugv1beta1.IncidentPodUIDLabel]
		if perPod[pod] == nil {
			perPod[pod] = map[string]bool{}
		}
		if ev.Type == watch.Deleted {
			delete(perPod[pod], m.GetName())
			return
		}
		perPod[pod][m.GetName()] = true
		if len(perPod[pod]) > 1 {
			f.violate(checkIncidentOnce, "pod %s has %d records of its one crash", pod, len(perPod[pod]))
		}
	})
	pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "catch"},
		Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Image: podBuggerImage, Triggers: []debugv1beta1.Trigger{debugv1beta1.TriggerError}}}
	return plan{
		trigger: []func() error{func() error { return ignoreExists(env.Client.Create(ctx, pb.DeepCopy())) }},
		converged: func() error {
			list := &debugv1beta1.PodIncidentList{}
			if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
			pods := map[string]int32{}
			for _, r := range list.Items {
				pods[r.Spec.Pod.Name] += r.Spec.Count
			}
			if len(list.Items) != 3 || len(pods) != 3 {
				return fmt.Errorf("%d records of %d pods, want one of each of 3", len(list.Items), len(pods))
			}
			for pod, n := range pods {
				if n != 1 {
					f.violate(checkIncidentOnce, "pod %s's one crash counted %d times", pod, n)
				}
			}
			return nil
		},
		final: func() {},
	}
}
