package v1beta1_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	podsetcontroller "github.com/deckhand-dev/deckhand/internal/controller/podset"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, &env) }

func podSet(ns string, mutate func(*corev1.PodSpec)) *appsv1beta1.PodSet {
	tmpl := &corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
	}
	mutate(&tmpl.Spec)
	return &appsv1beta1.PodSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "web-"},
		Spec:       appsv1beta1.PodSetSpec{Replicas: 1, Template: tmpl},
	}
}

// The webhook refuses what the apiserver would refuse in a pod, and names
// the template's field; no copy of the pod rules is involved.
func TestWebhookRefusesTemplatesWhosePodsTheApiserverWouldRefuse(t *testing.T) {
	opts := env.ManagerOptions()
	opts.Controllers = []string{podsetcontroller.ControllerName}
	env.StartManager(t, opts)
	ns := env.Namespace(t)
	ctx := context.Background()

	tests := map[string]struct {
		mutate func(*corev1.PodSpec)
		want   []string
	}{
		"container name": {mutate: func(s *corev1.PodSpec) { s.Containers[0].Name = "Bad_Name" },
			want: []string{"spec.template.spec.containers[0].name", "Bad_Name"}},
		"two containers with one name": {mutate: func(s *corev1.PodSpec) { s.Containers = append(s.Containers, s.Containers[0]) },
			want: []string{"spec.template.spec.containers[1]", "Duplicate value"}},
		"limit below request": {mutate: func(s *corev1.PodSpec) {
			s.Containers[0].Resources = corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resourceMust("2")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resourceMust("1")},
			}
		}, want: []string{"spec.template.spec.containers[0].resources.requests", "must be less than or equal to cpu limit"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			g := testenv.NewG(t)
			err := env.Client.Create(ctx, podSet(ns, tc.mutate))
			g.Expect(err).To(HaveOccurred())
			for _, w := range tc.want {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}

	g := testenv.NewG(t)
	set := podSet(ns, func(*corev1.PodSpec) {})
	g.Expect(env.Client.Create(ctx, set)).To(Succeed(), "a valid template is admitted")
	// A template change is checked again.
	err := env.Update(set, func() { set.Spec.Template.Spec.Containers[0].Name = "Bad_Name" })
	g.Expect(err).To(MatchError(ContainSubstring("spec.template.spec.containers[0].name")))
	// The dry run made no pod of its own.
	pods := &corev1.PodList{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Client.List(ctx, pods, client.InNamespace(ns))).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(1))
	}).Should(Succeed())
}

func resourceMust(s string) resource.Quantity { return resource.MustParse(s) }
