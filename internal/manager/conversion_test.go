package manager_test

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/deckhand-dev/deckhand/api/apps/v1alpha1"
	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// Both versions of PodSet are served through the manager's conversion
// webhook, even with the podset controller off: what is written as
// v1alpha1 reads back as v1beta1 with the same values under the new names,
// and the other way round.
func TestPodSetVersionsConvertThroughTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	opts := env.ManagerOptions()
	opts.Controllers = []string{"modelbox"}
	env.StartManager(t, opts)
	ns := env.Namespace(t)

	alpha := &appsv1alpha1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"team": "a"}},
		Spec: appsv1alpha1.PodSetSpec{
			Size:            2,
			Template:        webTemplate(),
			MinReadySeconds: 5,
			UpdateStrategy: appsv1alpha1.PodSetUpdateStrategy{
				Type:           appsv1alpha1.RollingUpdateStrategy,
				MaxUnavailable: ptr.To(intstr.FromInt32(0)),
				MaxSurge:       ptr.To(intstr.FromString("50%")),
			},
		},
	}
	g.Expect(env.Client.Create(ctx, alpha)).To(Succeed())

	beta := &appsv1beta1.PodSet{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(alpha), beta)).To(Succeed())
	g.Expect(beta.Labels).To(Equal(alpha.Labels))
	g.Expect(beta.Spec.Replicas).To(Equal(int32(2)))
	g.Expect(beta.Spec.Template).To(Equal(alpha.Spec.Template))
	g.Expect(beta.Spec.MinReadySeconds).To(Equal(int32(5)))
	g.Expect(beta.Spec.UpdateStrategy).To(Equal(appsv1beta1.PodSetUpdateStrategy{
		Type: appsv1beta1.RollingUpdateStrategy,
		RollingUpdate: appsv1beta1.PodSetRollingUpdate{
			MaxUnavailable: ptr.To(intstr.FromInt32(0)),
			MaxSurge:       ptr.To(intstr.FromString("50%")),
		},
	}))

	// Written as v1beta1 (spec and status), read as v1alpha1.
	beta.Spec.Replicas = 4
	g.Expect(env.Client.Update(ctx, beta)).To(Succeed())
	beta.Status = appsv1beta1.PodSetStatus{PodNames: []string{"web-a", "web-b"}, Replicas: 2, Selector: "apps.deckhand.dev/podset=web"}
	g.Expect(env.Client.Status().Update(ctx, beta)).To(Succeed())

	back := &appsv1alpha1.PodSet{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(alpha), back)).To(Succeed())
	g.Expect(back.Spec.Size).To(Equal(int32(4)))
	g.Expect(back.Spec.Template).To(Equal(alpha.Spec.Template))
	g.Expect(back.Spec.UpdateStrategy).To(Equal(alpha.Spec.UpdateStrategy))
	g.Expect(back.Status.Nodes).To(Equal([]string{"web-a", "web-b"}))
	g.Expect(back.Status.Replicas).To(Equal(int32(2)))
	g.Expect(back.Annotations).To(BeEmpty(), "nothing of v1beta1 needs keeping aside")
}

// runAsUser exists only in v1beta1: a v1alpha1 client that reads a
// PodBugger, changes it and writes it back keeps it, and a PodBugger written
// as v1alpha1 reads as v1beta1 with the same values.
func TestPodBuggerVersionsConvertThroughTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	opts := env.ManagerOptions()
	opts.Controllers = []string{"podbugger"}
	opts.PodBuggerAllowedImages = []string{"docker.io/library/busybox:*"}
	env.StartManager(t, opts)
	ns := env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})

	beta := &debugv1beta1.PodBugger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "dbg"},
		Spec: debugv1beta1.PodBuggerSpec{
			Selector:  metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Image:     "docker.io/library/busybox:1.37",
			Command:   []string{"sleep", "1d"},
			RunAsUser: ptr.To(int64(1000)),
			Triggers:  []debugv1beta1.Trigger{debugv1beta1.TriggerRunning, debugv1beta1.TriggerNotReady},
			// The incident fields, new in v1beta1 too.
			NotReadyAfter: &metav1.Duration{Duration: time.Minute},
			Incidents:     &debugv1beta1.IncidentPolicy{MaxRecords: 7, Inject: true},
		},
	}
	g.Expect(env.Client.Create(ctx, beta)).To(Succeed())

	alpha := &debugv1alpha1.PodBugger{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(beta), alpha)).To(Succeed())
	g.Expect(alpha.Spec.Image).To(Equal(beta.Spec.Image))
	g.Expect(alpha.Spec.Command).To(Equal(beta.Spec.Command))
	g.Expect(alpha.Annotations).To(HaveKey(debugv1alpha1.ConversionDataAnnotation))

	// A v1alpha1 read-modify-write: runAsUser and the incident fields
	// survive it. (Read again on a conflict: the controller writes the
	// status meanwhile.)
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(beta), alpha); err != nil {
			return err
		}
		alpha.Spec.MaxPods = 3
		alpha.Labels = map[string]string{"edited": "v1alpha1"}
		return env.Client.Update(ctx, alpha)
	})).To(Succeed())
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(beta), beta)).To(Succeed())
	g.Expect(beta.Spec.RunAsUser).To(Equal(ptr.To(int64(1000))))
	g.Expect(beta.Spec.Triggers).To(Equal([]debugv1beta1.Trigger{debugv1beta1.TriggerRunning, debugv1beta1.TriggerNotReady}))
	g.Expect(beta.Spec.NotReadyAfter).To(Equal(&metav1.Duration{Duration: time.Minute}))
	g.Expect(beta.Spec.Incidents).To(And(HaveField("MaxRecords", int32(7)), HaveField("Inject", true)))
	g.Expect(beta.Spec.MaxPods).To(Equal(int32(3)))
	g.Expect(beta.Labels).To(Equal(alpha.Labels))
	g.Expect(beta.Annotations).NotTo(HaveKey(debugv1alpha1.ConversionDataAnnotation), "the annotation is never stored")

	// Written as v1alpha1, read as v1beta1: the same values.
	written := &debugv1alpha1.PodBugger{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old-client"},
		Spec: debugv1alpha1.PodBuggerSpec{
			Selector:            metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Image:               "docker.io/library/busybox:1.37",
			TargetContainerName: "web",
			Profile:             debugv1alpha1.ProfileBaseline,
			MaxPods:             2,
		},
	}
	g.Expect(env.Client.Create(ctx, written)).To(Succeed())
	read := &debugv1beta1.PodBugger{}
	g.Expect(env.Client.Get(ctx, client.ObjectKeyFromObject(written), read)).To(Succeed())
	g.Expect(read.Spec.TargetContainerName).To(Equal("web"))
	g.Expect(read.Spec.Profile).To(Equal(debugv1beta1.ProfileBaseline))
	g.Expect(read.Spec.MaxPods).To(Equal(int32(2)))
	g.Expect(read.Spec.RunAsUser).To(BeNil())
}

// The admission webhooks are registered for v1beta1 with matchPolicy
// Equivalent: an object written as v1alpha1 reaches them converted, so a bad
// object is refused in either version, with the same field named.
func TestBadObjectsAreRefusedInBothVersions(t *testing.T) {
	ctx := context.Background()
	opts := env.ManagerOptions()
	opts.Controllers = []string{"podset", "podbugger"}
	opts.PodBuggerAllowedImages = []string{"docker.io/library/busybox:*"}
	env.StartManager(t, opts)
	ns := env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})

	// Only the webhook knows both rules: a container name the pod
	// validation refuses (the dry-run pod), an image off the allow-list.
	badTemplate := webTemplate()
	badTemplate.Spec.Containers[0].Name = "Bad_Name"
	const evil = "docker.io/evil/busybox:1.37"
	selector := metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	tests := map[string]struct {
		obj  client.Object
		want string
	}{
		"PodSet v1alpha1": {&appsv1alpha1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha"},
			Spec: appsv1alpha1.PodSetSpec{Size: 1, Template: badTemplate}}, "spec.template.spec.containers[0].name"},
		"PodSet v1beta1": {&appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "beta"},
			Spec: appsv1beta1.PodSetSpec{Replicas: 1, Template: badTemplate}}, "spec.template.spec.containers[0].name"},
		"PodBugger v1alpha1": {&debugv1alpha1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha"},
			Spec: debugv1alpha1.PodBuggerSpec{Selector: selector, Image: evil}}, "spec.image"},
		"PodBugger v1beta1": {&debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "beta"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: selector, Image: evil}}, "spec.image"},
		// v1beta1's schema refuses runAsUser 0; v1alpha1 has no field for it
		// and carries it in an annotation, past any schema.
		"PodBugger v1alpha1 as root through its conversion annotation": {&debugv1alpha1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "root",
			Annotations: map[string]string{debugv1alpha1.ConversionDataAnnotation: `{"runAsUser":0}`}},
			Spec: debugv1alpha1.PodBuggerSpec{Selector: selector, Image: "docker.io/library/busybox:1.37"}}, "spec.runAsUser"},
		"PodBugger v1beta1 with a regex bomb to redact": {&debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bomb"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: selector, Image: "docker.io/library/busybox:1.37", Triggers: []debugv1beta1.Trigger{debugv1beta1.TriggerError},
				Incidents: &debugv1beta1.IncidentPolicy{Redact: []string{"token-\\w+", "(?:" + strings.Repeat("a", 200) + "){1000}"}}}},
			"spec.incidents.redact[1]"},
		"PodBugger v1alpha1 with a regex bomb to redact through its conversion annotation": {&debugv1alpha1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha-bomb",
			Annotations: map[string]string{debugv1alpha1.ConversionDataAnnotation: `{"incidents":{"redact":["(?:aaaaaaaaaaaaaaaaaaaa){1000}"]},"triggers":["Error"]}`}},
			Spec: debugv1alpha1.PodBuggerSpec{Selector: selector, Image: "docker.io/library/busybox:1.37"}}, "spec.incidents.redact[0]"},
		// Artifacts: the schema refuses a volume that is no volume name in
		// v1beta1 (and CEL a collector without a way to be injected); the
		// webhook, for v1alpha1's annotation.
		"PodBugger v1beta1 with artifacts in a volume that cannot be one": {&debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "art"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: selector, Image: "docker.io/library/busybox:1.37",
				Triggers:  []debugv1beta1.Trigger{debugv1beta1.TriggerError},
				Incidents: &debugv1beta1.IncidentPolicy{Inject: true, Artifacts: &debugv1beta1.IncidentArtifacts{Volume: "../etc"}}}},
			"spec.incidents.artifacts.volume"},
		"PodBugger v1beta1 with artifacts and a command": {&debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "art-cmd"},
			Spec: debugv1beta1.PodBuggerSpec{Selector: selector, Image: "docker.io/library/busybox:1.37", Command: []string{"sleep", "1d"},
				Triggers:  []debugv1beta1.Trigger{debugv1beta1.TriggerError},
				Incidents: &debugv1beta1.IncidentPolicy{Inject: true, Artifacts: &debugv1beta1.IncidentArtifacts{Volume: "dumps"}}}},
			"spec.command"},
		"PodBugger v1alpha1 with artifacts in a volume that cannot be one through its conversion annotation": {&debugv1alpha1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha-art",
			Annotations: map[string]string{debugv1alpha1.ConversionDataAnnotation: `{"incidents":{"inject":true,"artifacts":{"volume":"../etc"}},"triggers":["Error"]}`}},
			Spec: debugv1alpha1.PodBuggerSpec{Selector: selector, Image: "docker.io/library/busybox:1.37"}}, "spec.incidents.artifacts.volume"},
		"PodBugger v1alpha1 with artifacts beyond their bound through its conversion annotation": {&debugv1alpha1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha-art-big",
			Annotations: map[string]string{debugv1alpha1.ConversionDataAnnotation: `{"incidents":{"inject":true,"artifacts":{"volume":"dumps","maxBytes":99999999999}},"triggers":["Error"]}`}},
			Spec: debugv1alpha1.PodBuggerSpec{Selector: selector, Image: "docker.io/library/busybox:1.37"}}, "spec.incidents.artifacts.maxBytes"},
		"PodBugger v1alpha1 with artifacts no container collects through its conversion annotation": {&debugv1alpha1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha-art-noinj",
			Annotations: map[string]string{debugv1alpha1.ConversionDataAnnotation: `{"incidents":{"artifacts":{"volume":"dumps"}},"triggers":["Error"]}`}},
			Spec: debugv1alpha1.PodBuggerSpec{Selector: selector, Image: "docker.io/library/busybox:1.37"}}, "spec.incidents.artifacts"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := env.Client.Create(ctx, tt.obj)
			g.Expect(err).To(MatchError(ContainSubstring(tt.want + ": ")))
		})
	}
}

func webTemplate() *corev1.PodTemplateSpec {
	return &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
}
