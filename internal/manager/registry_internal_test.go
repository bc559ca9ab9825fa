package manager

import (
	"flag"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
)

// What the cache keeps of a pod comes from the registry: without PodSet's
// SlimPod its pods keep no status beyond PodBugger's fields and no
// annotation, without any SlimPod a pod keeps no container, node or phase.
func TestSlimPodComesFromTheRegistry(t *testing.T) {
	pod := func() *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "web-1", Annotations: map[string]string{"a": "b", appsv1beta1.DeleteFirstAnnotation: "true"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: appsv1beta1.GroupVersion.String(), Kind: "PodSet", Name: "web", UID: "u", Controller: new(true)}}},
			Spec:   corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			Status: corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
		}
	}
	without := func(drop func(*Controller)) []Controller {
		r := Registry()
		for i := range r {
			drop(&r[i])
		}
		return r
	}
	slim := func(registry []Controller) *corev1.Pod {
		return slimPod(registry, pod()).(*corev1.Pod)
	}
	if got := slim(Registry()); got.Annotations["a"] != "" || got.Annotations[appsv1beta1.DeleteFirstAnnotation] != "true" ||
		got.Spec.Containers[0].Image != "" || len(got.Status.Conditions) != 1 {
		t.Errorf("a PodSet's pod slimmed to %+v, want its status and deletion-order annotations, not its template", got)
	}
	if got := slim(without(func(c *Controller) {
		if c.Name == "podset" {
			c.SlimPod = nil
		}
	})); got.Annotations != nil || got.Spec.Containers[0].Image != "" || len(got.Status.Conditions) != 1 ||
		got.Spec.Containers[0].Name != "app" || got.Spec.NodeName != "node-1" || got.Status.Phase != corev1.PodRunning {
		t.Errorf("without PodSet's SlimPod, a PodSet's pod slimmed to %+v, want PodBugger's fields only", got)
	}
	if got := slim(without(func(c *Controller) { c.SlimPod = nil })); got.Name != "web-1" ||
		got.Spec.Containers != nil || got.Spec.NodeName != "" || got.Status.Phase != "" {
		t.Errorf("without any SlimPod, a pod slimmed to %+v, want its metadata only", got)
	}
}

// Each kind's flags come from its registry entry: a flag an entry binds is
// named after it, and a field of setupoptions.Options named after a kind
// belongs to a kind whose entry binds flags.
func TestPerKindFlagsComeFromTheRegistry(t *testing.T) {
	bound := map[string]bool{}
	for _, c := range Registry() {
		if c.BindFlags == nil {
			continue
		}
		fs := flag.NewFlagSet(c.Name, flag.ContinueOnError)
		c.BindFlags(fs, &setupoptions.Options{})
		fs.VisitAll(func(f *flag.Flag) {
			if !strings.HasPrefix(f.Name, c.Name+"-") {
				t.Errorf("controller %s binds --%s: a kind's flags are named %s-…", c.Name, f.Name, c.Name)
			}
		})
		bound[c.Name] = true
	}
	fields := reflect.TypeFor[setupoptions.Options]()
	for i := range fields.NumField() {
		name := strings.ToLower(fields.Field(i).Name)
		for _, known := range KnownControllers() {
			if strings.HasPrefix(name, known) && !bound[known] {
				t.Errorf("setupoptions.Options.%s is %s's, whose registry entry binds no flags", fields.Field(i).Name, known)
			}
		}
	}
	if !slices.Contains(KnownControllers(), "podbugger") || !bound["podbugger"] {
		t.Errorf("PodBugger's flags are not bound by its entry")
	}
	fs := flag.NewFlagSet("deckhand", flag.ContinueOnError)
	var o Options
	o.BindFlags(fs)
	if err := fs.Parse([]string{"--podbugger-allow-host-access", "--podbugger-allowed-images=a:*,b:*"}); err != nil {
		t.Fatal(err)
	}
	if !o.PodBuggerAllowHostAccess || !slices.Equal(o.PodBuggerAllowedImages, []string{"a:*", "b:*"}) {
		t.Errorf("the manager's flags did not set PodBugger's options: %+v", o.Options)
	}
}

// A kind registering itself comes after the four and is known by name; a
// name registered twice is refused, so two kinds cannot share a
// --controllers name.
func TestRegisterAddsAKindOnce(t *testing.T) {
	saved := controllers
	t.Cleanup(func() { controllers = saved })
	controllers = slices.Clone(saved)
	register(Controller{Name: "gadget", Setup: func(ctrl.Manager, setupoptions.Options) error { return nil }})
	if got := KnownControllers(); got[len(got)-1] != "gadget" {
		t.Errorf("KnownControllers() = %v, want gadget last", got)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering podset twice did not panic")
		}
	}()
	register(Controller{Name: "podset"})
}
