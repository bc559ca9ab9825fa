package podbugger_test

import (
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/podbuggertest"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// hostPIDPod creates a running pod, labelled app=web, that shares its
// node's process namespace: a debug container in it would see every
// process of the node.
func hostPIDPod(t *testing.T, ns, name string) *corev1.Pod {
	t.Helper()
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: podbuggertest.Web},
		Spec: corev1.PodSpec{HostPID: true,
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}},
	}
	env.Create(t, p)
	podbuggertest.SetRunning(t, env, p)
	return p
}

// TestPodsThatReachTheirNodeAreSkipped: a PodBugger does not inject into a
// hostPID pod it selects, and says so in an Event on the PodBugger; it
// injects into the ordinary pod beside it.
func TestPodsThatReachTheirNodeAreSkipped(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	env.StartManager(t, podbuggertest.Options(env))
	host := hostPIDPod(t, ns, "web-host")
	pod(t, ns, "web-1", podbuggertest.Web, true)
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	env.Create(t, pb)

	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-1")).Should(HaveLen(1))
	g.Eventually(env.Events(ns, pb)).Should(ContainElement(
		"PodReachesHost: Pod web-host skipped: pod reaches into its node (hostPID), and so would a debug container in it; " +
			"the operator allows that with --podbugger-allow-host-access"))
	g.Consistently(podbuggertest.Ephemeral(env, ns, host.Name)).Should(BeEmpty())
}

// TestTheOperatorMayAllowPodsThatReachTheirNode: with
// --podbugger-allow-host-access, the hostPID pod is injected.
func TestTheOperatorMayAllowPodsThatReachTheirNode(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	opts := podbuggertest.Options(env)
	opts.PodBuggerAllowHostAccess = true
	env.StartManager(t, opts)
	hostPIDPod(t, ns, "web-host")
	env.Create(t, podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web))
	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-host")).Should(HaveLen(1))
}

// claimOn creates the PersistentVolume pvName from src, bound to the claim
// name in ns (envtest runs no binder: the claim names its volume), and
// returns the pod volume that mounts the claim.
func claimOn(t *testing.T, ns, name, pvName string, src corev1.PersistentVolumeSource) corev1.Volume {
	t.Helper()
	storage := corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}
	modes := []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}
	env.Create(t, &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: pvName},
		Spec: corev1.PersistentVolumeSpec{Capacity: storage, AccessModes: modes, PersistentVolumeSource: src,
			ClaimRef: &corev1.ObjectReference{Namespace: ns, Name: name}}})
	env.Create(t, &corev1.PersistentVolumeClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PersistentVolumeClaimSpec{AccessModes: modes, VolumeName: pvName,
			Resources: corev1.VolumeResourceRequirements{Requests: storage}}})
	return corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: name}}}
}

// TestPodsWhoseClaimsReachTheirNodeAreSkipped: a pod whose spec shows only a
// claim, bound to a hostPath PersistentVolume, is skipped with an Event
// naming the volume; a pod whose claim is bound to a network volume gets the
// container.
func TestPodsWhoseClaimsReachTheirNodeAreSkipped(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	env.StartManager(t, podbuggertest.Options(env))
	withClaim := func(name string, v corev1.Volume) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: podbuggertest.Web},
			Spec: corev1.PodSpec{Volumes: []corev1.Volume{v},
				Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
		env.Create(t, p)
		podbuggertest.SetRunning(t, env, p)
	}
	withClaim("web-hostpath", claimOn(t, ns, "root", ns+"-root", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}))
	withClaim("web-nfs", claimOn(t, ns, "shared", ns+"-shared", corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs.example.com", Path: "/"}}))
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	env.Create(t, pb)

	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-nfs")).Should(HaveLen(1))
	g.Eventually(env.Events(ns, pb)).Should(ContainElement(
		"PodReachesHost: Pod web-hostpath skipped: pod reaches into its node (volume data bound to hostPath PersistentVolume " + ns + "-root), " +
			"and so would a debug container in it; the operator allows that with --podbugger-allow-host-access"))
	g.Consistently(podbuggertest.Ephemeral(env, ns, "web-hostpath")).Should(BeEmpty())
}

// TestOnlyPodsWithTheArtifactVolumeGetTheCollector: with
// incidents.artifacts, a pod whose named volume is an emptyDir gets the
// collector, mounting that volume and no other; a pod without the volume,
// or where it is a Secret, is skipped with an Event (the cache keeps no
// volume of a pod: the check is made on the pod read afresh).
func TestOnlyPodsWithTheArtifactVolumeGetTheCollector(t *testing.T) {
	g := testenv.NewG(t)
	ns := podbuggertest.EnabledNamespace(t, env)
	env.StartManager(t, podbuggertest.Options(env))
	withVolume := func(name string, v *corev1.VolumeSource) {
		p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: podbuggertest.Web},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10"}}}}
		if v != nil {
			p.Spec.Volumes = []corev1.Volume{{Name: "dumps", VolumeSource: *v}}
		}
		env.Create(t, p)
		podbuggertest.SetRunning(t, env, p)
	}
	withVolume("web-dumps", &corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}})
	withVolume("web-secret", &corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}})
	withVolume("web-none", nil)
	pb := podbuggertest.PodBugger(ns, "web-debug", podbuggertest.Web)
	pb.Spec.Triggers = []debugv1beta1.Trigger{debugv1beta1.TriggerRunning, debugv1beta1.TriggerError}
	pb.Spec.Incidents = &debugv1beta1.IncidentPolicy{Artifacts: &debugv1beta1.IncidentArtifacts{Volume: "dumps", Keep: ptr.To[int32](0)}}
	env.Create(t, pb)

	g.Eventually(podbuggertest.Ephemeral(env, ns, "web-dumps")).Should(HaveLen(1))
	got := &corev1.Pod{}
	g.Expect(env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-dumps"}, got)).To(Succeed())
	g.Expect(got.Spec.EphemeralContainers[0].VolumeMounts).To(Equal([]corev1.VolumeMount{
		{Name: "dumps", MountPath: "/deckhand-artifacts", ReadOnly: true}}))
	g.Eventually(env.Events(ns, pb)).Should(ContainElements(
		"ArtifactVolumeNotUsable: Pod web-secret skipped: its volume dumps (spec.incidents.artifacts.volume) is not an emptyDir, persistentVolumeClaim or ephemeral volume",
		"ArtifactVolumeNotUsable: Pod web-none skipped: pod has no volume named dumps (spec.incidents.artifacts.volume)"))
	g.Consistently(podbuggertest.Ephemeral(env, ns, "web-secret")).Should(BeEmpty())
	g.Expect(podbuggertest.Ephemeral(env, ns, "web-none")()).To(BeEmpty())
}
