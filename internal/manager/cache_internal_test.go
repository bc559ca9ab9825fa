package manager

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
)

func TestSlimPod(t *testing.T) {
	created := metav1.Unix(1000, 0)
	deleting := metav1.Unix(2000, 0)
	grace := int64(30)
	podSetRef := metav1.OwnerReference{APIVersion: appsv1beta1.GroupVersion.String(), Kind: "PodSet", Name: "web", UID: "set-uid", Controller: new(true)}
	v1alpha1Ref := podSetRef
	v1alpha1Ref.APIVersion = "apps.deckhand.dev/v1alpha1"
	replicaSetRef := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web", UID: "rs-uid", Controller: new(true)}
	// full is a pod with a bit of everything a real pod carries.
	full := func(owners ...metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{
			TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "web-1", Namespace: "shop", UID: "pod-uid", ResourceVersion: "42", Generation: 2,
				CreationTimestamp: created, DeletionTimestamp: &deleting, DeletionGracePeriodSeconds: &grace,
				Labels:          map[string]string{"app": "web"},
				Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{...}"},
				OwnerReferences: owners,
				Finalizers:      []string{"example.com/hold"},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			},
			Spec: corev1.PodSpec{
				NodeName:       "node-1",
				InitContainers: []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"true"}}},
				Containers: []corev1.Container{{
					Name: "app", Image: "nginx", Env: []corev1.EnvVar{{Name: "A", Value: "b"}},
				}},
				EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger", Image: "busybox"}}},
				Volumes:             []corev1.Volume{{Name: "data"}},
			},
			Status: corev1.PodStatus{
				Phase:             corev1.PodRunning,
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 3}},
				PodIP:             "10.0.0.1",
				Message:           "all good",
			},
		}
	}
	withDeletionAnnotations := func(p *corev1.Pod) *corev1.Pod {
		p.Annotations["apps.deckhand.dev/delete-first"] = "true"
		p.Annotations["controller.kubernetes.io/pod-deletion-cost"] = "-5"
		return p
	}
	slim := func(owners ...metav1.OwnerReference) *corev1.Pod {
		return &corev1.Pod{
			TypeMeta: metav1.TypeMeta{Kind: "Pod", APIVersion: "v1"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "web-1", Namespace: "shop", UID: "pod-uid", ResourceVersion: "42", Generation: 2,
				CreationTimestamp: created, DeletionTimestamp: &deleting, DeletionGracePeriodSeconds: &grace,
				Labels:          map[string]string{"app": "web"},
				OwnerReferences: owners,
				Finalizers:      []string{"example.com/hold"},
			},
			Spec: corev1.PodSpec{
				NodeName:            "node-1",
				InitContainers:      []corev1.Container{{Name: "init"}},
				Containers:          []corev1.Container{{Name: "app"}},
				EphemeralContainers: []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debugger"}}},
			},
			// PodBugger's incident recorder keeps what shows a failure.
			Status: corev1.PodStatus{Phase: corev1.PodRunning,
				Conditions:        []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
				ContainerStatuses: []corev1.ContainerStatus{{Name: "app", RestartCount: 3}}},
		}
	}
	// podSetPod is what a PodSet's pod keeps: the slim pod, the status
	// PodSet reads (no addresses) and the annotations that order deletions.
	podSetPod := func(owner metav1.OwnerReference) *corev1.Pod {
		p := slim(owner)
		p.Status.Message = "all good"
		p.Annotations = map[string]string{"apps.deckhand.dev/delete-first": "true", "controller.kubernetes.io/pod-deletion-cost": "-5"}
		return p
	}
	tombstone := cache.DeletedFinalStateUnknown{Key: "shop/web-1", Obj: full()}

	tests := map[string]struct {
		in   any
		want any
	}{
		// Its template (env, volumes, images, annotations: up to the object
		// size limit, as a namespace editor wrote it) is not held per pod.
		"a PodSet's pod keeps its status and deletion annotations, not its template": {in: withDeletionAnnotations(full(podSetRef)), want: podSetPod(podSetRef)},
		"a pod nobody owns keeps what the controllers read":                          {in: full(), want: slim()},
		// Made by a build from before v1beta1 (before v0.5.0), whose PodSets were v1alpha1: slimmed,
		// its PodSet saw it unready and rolled every old pod at once.
		"a pod of a v1alpha1 PodSet keeps its status":   {in: withDeletionAnnotations(full(v1alpha1Ref)), want: podSetPod(v1alpha1Ref)},
		"a ReplicaSet's pod is slimmed, its owner kept": {in: full(replicaSetRef), want: slim(replicaSetRef)},
		"a PodSet that only owns (not controls) the pod does not keep it whole": {
			in:   full(metav1.OwnerReference{APIVersion: podSetRef.APIVersion, Kind: "PodSet", Name: "web", UID: "set-uid"}),
			want: slim(metav1.OwnerReference{APIVersion: podSetRef.APIVersion, Kind: "PodSet", Name: "web", UID: "set-uid"}),
		},
		"a pod with no containers of a kind keeps none": {in: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}, want: &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "bare"}}},
		"anything else passes unchanged":                {in: tombstone, want: tombstone},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := SlimPod(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			// The cache holds it compact, and every read expands it.
			if c, ok := got.(*cachedPod); ok {
				if c.whole != nil {
					t.Errorf("SlimPod() held the pod whole, not compact")
				}
				got, _ = ExpandPod(c)
				got.(*corev1.Pod).TypeMeta = tc.in.(*corev1.Pod).TypeMeta
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SlimPod() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The self-signed certificate names the metrics Service beside the webhook
// Service, so a ServiceMonitor verifying it by that name succeeds.
func TestSelfSignedCertificateNamesBothServices(t *testing.T) {
	got := certHosts(Options{Namespace: "deckhand-system"})
	want := []string{"deckhand-webhook-service.deckhand-system.svc", "deckhand-controller-manager-metrics.deckhand-system.svc"}
	if !slices.Equal(got, want) {
		t.Fatalf("certHosts = %v, want %v", got, want)
	}
	if got := certHosts(Options{Namespace: "x", WebhookCertHosts: []string{"127.0.0.1"}}); !slices.Equal(got, []string{"127.0.0.1"}) {
		t.Fatalf("explicit hosts: %v", got)
	}
}
