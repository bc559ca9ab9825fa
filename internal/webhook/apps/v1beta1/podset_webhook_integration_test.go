package v1beta1_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
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

// Any pod that reaches the webhook port can send it a review by hand. One
// whose PodSet names another namespace than the review is refused, naming
// metadata.namespace, and the manager's dry-run never runs there: the
// sender learns nothing of that namespace (here, its Pod Security level
// refusing the pod, which the dry-run would have reported as a warning).
func TestAReviewNamingAnotherNamespaceIsRefusedWithoutADryRun(t *testing.T) {
	opts := env.ManagerOptions()
	opts.Controllers = []string{podsetcontroller.ControllerName}
	env.StartManager(t, opts)
	g := testenv.NewG(t)
	mine := env.Namespace(t)
	victim := env.NamespaceWithLabels(t, map[string]string{"pod-security.kubernetes.io/enforce": "restricted"})

	review := func(reqNS, objNS string) *admissionv1.AdmissionResponse {
		set := podSet(objNS, func(*corev1.PodSpec) {})
		set.Name = "probe"
		set.APIVersion, set.Kind = appsv1beta1.GroupVersion.String(), "PodSet"
		raw, err := json.Marshal(set)
		g.Expect(err).NotTo(HaveOccurred())
		body, err := json.Marshal(&admissionv1.AdmissionReview{
			TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
			Request: &admissionv1.AdmissionRequest{
				UID:       "forged",
				Kind:      metav1.GroupVersionKind{Group: appsv1beta1.GroupVersion.Group, Version: "v1beta1", Kind: "PodSet"},
				Resource:  metav1.GroupVersionResource{Group: appsv1beta1.GroupVersion.Group, Version: "v1beta1", Resource: "podsets"},
				Name:      "probe",
				Namespace: reqNS,
				Operation: admissionv1.Create,
				Object:    runtime.RawExtension{Raw: raw},
			},
		})
		g.Expect(err).NotTo(HaveOccurred())
		// The sender does not care who the server is.
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
		url := fmt.Sprintf("https://%s/validate-apps-deckhand-dev-v1beta1-podset", net.JoinHostPort(opts.WebhookHost, strconv.Itoa(opts.WebhookPort)))
		resp, err := hc.Post(url, "application/json", bytes.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		defer func() { _ = resp.Body.Close() }()
		out := &admissionv1.AdmissionReview{}
		g.Expect(json.NewDecoder(resp.Body).Decode(out)).To(Succeed())
		g.Expect(out.Response).NotTo(BeNil())
		return out.Response
	}

	// The control: a review the apiserver would send, in the victim's
	// namespace, does run the dry-run and reports its Pod Security level.
	honest := review(victim, victim)
	g.Expect(honest.Allowed).To(BeTrue())
	g.Expect(strings.Join(honest.Warnings, " ")).To(ContainSubstring("PodSecurity"))

	forged := review(mine, victim)
	g.Expect(forged.Allowed).To(BeFalse())
	g.Expect(forged.Result.Message).To(ContainSubstring("metadata.namespace"))
	g.Expect(forged.Result.Message).To(ContainSubstring(mine))
	g.Expect(forged.Warnings).To(BeEmpty(), "no dry-run ran in %s", victim)
	g.Expect(forged.Result.Message).NotTo(ContainSubstring("PodSecurity"))
}
