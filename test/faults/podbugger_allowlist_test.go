//go:build faults

package faults_test

import (
	"context"
	"fmt"
	"path"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
)

// The PodBugger allow-list invariants, as docs/guides/podbugger.md promises them:
// the webhook refuses a spec.image off the operator's allow-list, and the
// controller adds no container whose image is off the allow-list in force
// (a PodBugger admitted under a wider list is Blocked), nor to a pod of a
// namespace that is not opted in.
const (
	checkPodBuggerAllowList = "never a container whose image is off the allow-list in force"
	checkPodBuggerAdmission = "an image off the allow-list is refused at admission"
)

const (
	// allowedBefore is the operator's allow-list when the legacy PodBugger
	// was admitted; allowedNow the narrower one the scenario's managers
	// enforce.
	legacyImage   = "registry.example.com/debug/tools:1"
	offListImage  = "docker.io/evil/busybox:1.37"
	newImage      = "docker.io/library/busybox:1.36"
	allowListName = "PodBugger allow-list narrowed, an off-list image requested"
)

var (
	allowedBefore = []string{"docker.io/library/busybox:*", "registry.example.com/debug/*"}
	allowedNow    = []string{"docker.io/library/busybox:*"}
)

func podBuggerAllowListScenario() scenario {
	return scenario{name: allowListName, controllers: []string{podbuggercontroller.ControllerName},
		staleCrashes: true, start: podBuggerAllowListPlan}
}

// podBuggerAllowListPlan: the operator narrowed the allow-list after a
// "legacy" PodBugger (image registry.example.com/debug/tools:1, pods
// app=api) was admitted; its pods start after that. The trigger creates a
// PodBugger "dbg" for the app=web pods, asks for an image off the list
// (refused), changes to another allowed image and starts one more web pod.
// Beside it, a namespace that opted out after its PodBugger was admitted.
func podBuggerAllowListPlan(t *testing.T, f *fixture) plan {
	ctx := context.Background()
	on := env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	off := env.NamespaceWithLabels(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	newPodBugger := func(ns, name, image, app string) *debugv1beta1.PodBugger {
		return &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: debugv1beta1.PodBuggerSpec{Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": app}},
				Image: image, MaxPods: 10}}
	}

	// Admitted under the wider list, before any of their pods run.
	f.opts.PodBuggerAllowedImages = allowedBefore
	stop := f.startPlain()
	env.Create(t, newPodBugger(on, "legacy", legacyImage, "api"))
	env.Create(t, newPodBugger(off, podBuggerName, podBuggerImage, "web"))
	stop()
	f.opts.PodBuggerAllowedImages = allowedNow
	nsOff := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: off}}
	if err := env.Update(nsOff, func() { delete(nsOff.Labels, debugv1beta1.NamespaceEnabledLabel) }); err != nil {
		t.Fatalf("opting %s out: %v", off, err)
	}

	pod := func(ns, name, app string) error {
		return ignoreExists(env.Client.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{"app": app}}, Spec: podSpec()}))
	}
	for _, p := range []struct{ ns, name, app string }{{on, "web-0", "web"}, {on, "web-1", "web"}, {on, "web-2", "web"},
		{on, "api-0", "api"}, {on, "api-1", "api"}, {off, "web-0", "web"}} {
		if err := pod(p.ns, p.name, p.app); err != nil {
			t.Fatalf("creating pod %s/%s: %v", p.ns, p.name, err)
		}
	}
	markRunning(t, on)
	markRunning(t, off)

	for _, ns := range []string{on, off} {
		observe(t, podList(ns), allowListChecks(f, allowedNow, off))
	}

	dbg := types.NamespacedName{Namespace: on, Name: podBuggerName}
	setImage := func(image string) error {
		pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Namespace: dbg.Namespace, Name: dbg.Name}}
		return env.Update(pb, func() { pb.Spec.Image = image })
	}
	return plan{
		trigger: []func() error{
			func() error {
				return ignoreExists(env.Client.Create(ctx, newPodBugger(on, podBuggerName, podBuggerImage, "web")))
			},
			func() error {
				err := setImage(offListImage)
				switch {
				case err == nil:
					f.violate(checkPodBuggerAdmission, "spec.image %s was admitted", offListImage)
				case apierrors.IsForbidden(err) || apierrors.IsInvalid(err):
					return nil
				}
				return err
			},
			func() error { return setImage(newImage) },
			func() error {
				if err := pod(on, "web-3", "web"); err != nil {
					return err
				}
				markRunning(t, on)
				return nil
			},
		},
		converged: func() error { return allowListConverged(ctx, on) },
		final:     func() {},
	}
}

// allowListConverged is nil once the four web pods carry dbg's container,
// dbg says so, and legacy is Blocked for its image, its pods untouched.
func allowListConverged(ctx context.Context, ns string) error {
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(ns)); err != nil {
		return err
	}
	for _, p := range pods.Items {
		if p.Status.Phase != corev1.PodRunning {
			return fmt.Errorf("pod %s is not running yet", p.Name)
		}
		if want := p.Labels["app"] == "web"; want != (len(p.Spec.EphemeralContainers) == 1) {
			return fmt.Errorf("pod %s carries %d ephemeral containers", p.Name, len(p.Spec.EphemeralContainers))
		}
	}
	pb := &debugv1beta1.PodBugger{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: podBuggerName}, pb); err != nil {
		return err
	}
	if pb.Status.Installed != 4 || pb.Status.ObservedGeneration != pb.Generation {
		return fmt.Errorf("PodBugger %s: status says %d installed, generation %d of %d", pb.Name, pb.Status.Installed, pb.Status.ObservedGeneration, pb.Generation)
	}
	legacy := &debugv1beta1.PodBugger{}
	if err := env.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "legacy"}, legacy); err != nil {
		return err
	}
	if c := meta.FindStatusCondition(legacy.Status.Conditions, debugv1beta1.ConditionBlocked); c == nil ||
		c.Status != metav1.ConditionTrue || c.Reason != debugv1beta1.ReasonImageNotAllowed {
		return fmt.Errorf("PodBugger legacy is not Blocked for its image: %v", c)
	}
	return nil
}

// allowListChecks checks each pod event: every ephemeral container seen
// for the first time must have an image the allow-list allows (globs, as
// path.Match reads them), in a namespace other than optedOut. What the
// apiserver holds is checked, whoever wrote it.
func allowListChecks(f *fixture, allowed []string, optedOut string) func(watch.Event) {
	seen := map[string]bool{}
	return func(ev watch.Event) {
		p := ev.Object.(*corev1.Pod)
		for _, c := range p.Spec.EphemeralContainers {
			id := fmt.Sprintf("%s/%s", p.UID, c.Name)
			if seen[id] {
				continue
			}
			seen[id] = true
			key := client.ObjectKeyFromObject(p)
			if !slices.ContainsFunc(allowed, func(pattern string) bool { ok, _ := path.Match(pattern, c.Image); return ok }) {
				f.violate(checkPodBuggerAllowList, "pod %s got container %s with image %s, allowed: %v", key, c.Name, c.Image, allowed)
			}
			if p.Namespace == optedOut {
				f.violate(checkPodBuggerNamespace, "pod %s got container %s", key, c.Name)
			}
		}
	}
}
