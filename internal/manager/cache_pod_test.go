package manager

import (
	"encoding/json"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/randfill"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/testenv/proc"
)

// Every field a controller's SlimPod keeps is held by a cachedPod, and read
// back as it was: pods of every shape (random, a PodSet's and not) slimmed
// by the registry, compacted and expanded, are the slim pod field for field,
// and none is held whole. A SlimPod that starts keeping a field cachedPod
// does not hold fails here, as does a cachedPod that drops one.
func TestCachedPodHoldsEveryFieldASlimPodKeeps(t *testing.T) {
	f := randfill.NewWithSeed(26).NilChance(0.2).NumElements(0, 3)
	podSet := metav1.OwnerReference{APIVersion: appsv1beta1.GroupVersion.String(), Kind: "PodSet", Name: "web", UID: "u", Controller: ptr.To(true)}
	for i := range 500 {
		pod := &corev1.Pod{}
		f.Fill(pod)
		if i%2 == 0 {
			pod.OwnerReferences = append(pod.OwnerReferences, podSet)
			if pod.Annotations == nil {
				pod.Annotations = map[string]string{}
			}
			pod.Annotations[appsv1beta1.DeleteFirstAnnotation] = "true"
		}
		if i%3 == 0 { // as the apiserver writes them (held packed)
			pod.UID = types.UID(fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", i, i%7, i%11, i%13, 1<<40+i))
		}
		slim := slimPod(controllers, pod).(*corev1.Pod)
		c := compactPod(slim)
		if c.whole != nil {
			t.Fatalf("pod %d: a slim pod is held whole: a SlimPod keeps a field cachedPod does not hold (compactFields): %s",
				i, cmp.Diff(slim, compactFields(slim).pod(slim.TypeMeta)))
		}
		got, ok := ExpandPod(c)
		if !ok {
			t.Fatal("ExpandPod refused a cachedPod")
		}
		got.(*corev1.Pod).TypeMeta = slim.TypeMeta
		if !equality.Semantic.DeepEqual(got, slim) {
			t.Fatalf("pod %d: read back differs from the slim pod (-slim +read):\n%s", i, cmp.Diff(slim, got))
		}
		// A copy reads the same, and shares nothing a reader could change.
		cp := c.DeepCopyObject().(*cachedPod)
		if again, _ := ExpandPod(cp); !equality.Semantic.DeepEqual(again.(*corev1.Pod).Status, slim.Status) {
			t.Fatalf("pod %d: a copy of the cachedPod reads differently", i)
		}
	}
}

// A slim pod with a field cachedPod does not hold is held whole rather than
// losing it: a reader sees it all the same.
func TestCachedPodHoldsWholeWhatItCannotCompact(t *testing.T) {
	slim := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"app": "web"}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"}}
	c := compactPod(slim)
	if c.whole == nil {
		t.Fatal("a pod with status.podIP was held compact: cachedPod does not hold it")
	}
	got, _ := ExpandPod(c)
	if p := got.(*corev1.Pod); p.Status.PodIP != "10.0.0.1" || p.Labels["app"] != "web" || c.GetName() != "p" || c.GetNamespace() != "ns" {
		t.Errorf("the pod held whole reads as %+v", p)
	}
}

// maxCachedPodBytes is what a pod Deckhand acts on may cost the cache's
// heap, with its entries in the informer's store and namespace index (issue
// 26's target).
const maxCachedPodBytes = 1024

// kwokPodJSON is a Running pod as the apiserver sends it (the bench's kwok
// pods: a container with a command and resources, scheduled, the status a
// kubelet reports), and as the crash-loop row makes it: its container
// failed once, waiting in CrashLoopBackOff. podSet says a PodSet controls
// it.
func kwokPodJSON(t testing.TB, i int, crashed, podSet bool) []byte {
	t.Helper()
	name, uid := fmt.Sprintf("target-%d", i), fmt.Sprintf("9a1c6a3e-8a43-4b0e-9d1e-%012d", i)
	at := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "scale-podbugger-1", UID: types.UID(uid), ResourceVersion: fmt.Sprint(200000 + i),
			CreationTimestamp: at, Labels: map[string]string{"app": "bench"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "bench", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1"}},
		},
		Spec: corev1.PodSpec{
			NodeName: fmt.Sprintf("kwok-node-%d", i%100), RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10", Command: []string{"/pause"},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}},
			Tolerations: []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, HostIP: "10.0.0.1", HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}},
			PodIP: fmt.Sprintf("10.1.%d.%d", i/250, i%250), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.1.%d.%d", i/250, i%250)}},
			StartTime: &at, QOSClass: corev1.PodQOSBestEffort,
			Conditions: []corev1.PodCondition{
				{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: at},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: at},
			},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Image: "registry.k8s.io/pause:3.10", Ready: true, Started: ptr.To(true),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}}}},
		},
	}
	if crashed {
		cs := &pod.Status.ContainerStatuses[0]
		cs.Ready, cs.Started, cs.RestartCount = false, ptr.To(false), 3
		cs.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff", Message: "back-off 40s restarting failed container"}}
		cs.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1, Reason: "Error",
			StartedAt: at, FinishedAt: at, ContainerID: fmt.Sprintf("containerd://%064d", i)}}
		pod.Status.Conditions[1] = corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionFalse, Reason: "ContainersNotReady",
			Message: "containers with unready status: [app]", LastTransitionTime: at}
	}
	if podSet {
		pod.OwnerReferences = []metav1.OwnerReference{{APIVersion: appsv1beta1.GroupVersion.String(), Kind: "PodSet", Name: "bench",
			UID: "5f0c6a3e-8a43-4b0e-9d1e-000000000001", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}
		pod.Labels[appsv1beta1.PodTemplateHashLabel] = "6d4cf56db6"
	}
	raw, err := json.Marshal(pod)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// A pod Deckhand acts on costs the cache what its readers read, not the
// 3.3 KB a slim corev1.Pod cost at N = 10,000 (issue 26). Each pod is
// decoded on its own, as a watch (or a streamed list) delivers it.
func TestCachedPodHeap(t *testing.T) {
	for name, shape := range map[string]struct {
		crashed, podSet bool
		most            int64
	}{
		"Running":             {most: maxCachedPodBytes},
		"crash-looping":       {crashed: true, most: maxCachedPodBytes},
		"a PodSet's, Running": {podSet: true, most: maxCachedPodBytes},
		// Over the target, by 38 B: it holds its owner, its Ready
		// condition's reason and the whole last termination (the
		// recorder keys a failure by its container ID, 80 B).
		"a PodSet's, crash-looping": {crashed: true, podSet: true, most: maxCachedPodBytes + 64},
	} {
		t.Run(name, func(t *testing.T) {
			const n = 10000
			raws := make([][]byte, n)
			for i := range raws {
				raws[i] = kwokPodJSON(t, i, shape.crashed, shape.podSet)
			}
			slim := heapPerPod(t, raws, func(pod *corev1.Pod) any { return slimPod(controllers, pod) })
			per := heapPerPod(t, raws, func(pod *corev1.Pod) any { p, _ := SlimPod(pod); return p })
			t.Logf("%d B of live heap per cached pod (%d B as a slim corev1.Pod)", per, slim)
			if per > shape.most {
				t.Errorf("a cached pod costs %d B of heap, more than %d", per, shape.most)
			}
		})
	}
}

// heapPerPod is the live heap each of raws costs decoded, transformed by
// hold and added to an informer's store.
func heapPerPod(t *testing.T, raws [][]byte, hold func(*corev1.Pod) any) int64 {
	store := toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	before := proc.LiveHeap()
	for i := range raws {
		pod := &corev1.Pod{}
		if err := json.Unmarshal(raws[i], pod); err != nil {
			t.Fatal(err)
		}
		if err := store.Add(hold(pod)); err != nil {
			t.Fatal(err)
		}
	}
	per := (proc.LiveHeap() - before) / int64(len(raws))
	runtime.KeepAlive(store)
	return per
}
