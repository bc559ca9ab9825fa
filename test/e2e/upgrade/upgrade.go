//go:build e2e

// Package upgrade tests upgrading Deckhand from the previous release (v0.5.0,
// made by its own `make release`: `make build-previous`) to the current
// build, on a fresh local cluster: the previous release installed from its
// own artifacts, objects of every kind created under it (PodSet and
// PodBugger in v1alpha1, as manifests written before v1beta1 say), the
// upgrade done as docs/operations/upgrading.md says, then nothing lost or
// replaced and the objects stored as v1beta1. This package upgrades an
// install.yaml install; package helm a Helm release. Check is the flow both
// run.
package upgrade

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1alpha1 "github.com/deckhand-dev/deckhand/api/apps/v1alpha1"
	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
	"github.com/deckhand-dev/deckhand/internal/testenv"
	"github.com/deckhand-dev/deckhand/test/cluster"
)

// Previous is the previous release as `make build-previous` made it: a
// directory (DECKHAND_PREVIOUS_RELEASE) holding what its `make release`
// wrote and the manager binary of its image.
type Previous struct{ Dir string }

// PreviousRelease is the previous release `make build-previous` made, or an
// error saying why there is none.
func PreviousRelease() (Previous, error) {
	dir := os.Getenv("DECKHAND_PREVIOUS_RELEASE")
	if dir == "" {
		return Previous{}, errors.New("DECKHAND_PREVIOUS_RELEASE is not set: run through 'make test-e2e', whose 'make build-previous' makes the previous release")
	}
	if _, err := os.Stat(filepath.Join(dir, ".complete")); err != nil {
		// make build-previous said why it made none (a clone without the
		// previous release's commit).
		return Previous{}, fmt.Errorf("no previous release in %s (%w): 'make build-previous' makes it from git", dir, err)
	}
	return Previous{Dir: dir}, nil
}

// Manager is the manager binary the previous release's image holds.
func (p Previous) Manager() string { return filepath.Join(p.Dir, "deckhand") }

// WebhookManifests are the previous release's webhook configurations, as
// controller-gen wrote them, for RunManagerFrom.
func (p Previous) WebhookManifests() string { return filepath.Join(p.Dir, "webhook-manifests.yaml") }

// Version is the previous release's version with its "v" (v0.5.0): the
// first word of the .complete that build-previous writes last.
func (p Previous) Version() (string, error) {
	data, err := os.ReadFile(filepath.Join(p.Dir, ".complete"))
	if err != nil {
		return "", err
	}
	version, _, _ := strings.Cut(strings.TrimSpace(string(data)), " ")
	return version, nil
}

// InstallYAML is the previous release's install.yaml.
func (p Previous) InstallYAML() string { return filepath.Join(p.Dir, "release", "install.yaml") }

// Chart is the previous release's chart package, deckhand-VERSION.tgz.
func (p Previous) Chart() (string, error) {
	charts, _ := filepath.Glob(filepath.Join(p.Dir, "release", "deckhand-*.tgz"))
	if len(charts) != 1 {
		return "", fmt.Errorf("want one chart package in %s, found %v", filepath.Join(p.Dir, "release"), charts)
	}
	return charts[0], nil
}

// missing says why there is no previous release; Check skips with it.
var missing error

// Main runs the package's tests on a fresh local cluster (package cluster's
// MainWithInstall) with the previous release installed by install. Without
// a previous release it starts no cluster and the tests skip, saying why.
func Main(m *testing.M, c **cluster.Cluster, install func(*cluster.Cluster, Previous) error) {
	previous, err := PreviousRelease()
	if err != nil {
		missing = err
		fmt.Fprintf(os.Stderr, "e2e: %v\n", err)
		os.Exit(m.Run())
	}
	cluster.MainWithInstall(m, c, 3, func(c *cluster.Cluster) error { return install(c, previous) })
}

// HelmBinary is the helm the e2e tests use: DECKHAND_HELM, or bin/helm-*.
func HelmBinary() (string, error) {
	if helm := os.Getenv("DECKHAND_HELM"); helm != "" {
		return helm, nil
	}
	root, err := testenv.RepoRoot()
	if err != nil {
		return "", err
	}
	matches, _ := filepath.Glob(filepath.Join(root, "bin", "helm-*"))
	if len(matches) == 0 {
		return "", errors.New("no helm in bin/: run through 'make test-e2e', which builds it")
	}
	return matches[len(matches)-1], nil
}

// objects are one of every kind, as a user of the previous release wrote
// them: PodSet and PodBugger in v1alpha1.
const objects = `
apiVersion: apps.deckhand.dev/v1alpha1
kind: PodSet
metadata: {name: web}
spec:
  size: 3
  updateStrategy: {type: RollingUpdate, maxSurge: 1, maxUnavailable: 0}
---
apiVersion: debug.deckhand.dev/v1alpha1
kind: PodBugger
metadata: {name: dbg}
spec:
  selector: {matchLabels: {app: nothing-yet}}
  image: docker.io/library/busybox:1.37
  maxPods: 2
---
apiVersion: model.deckhand.dev/v1
kind: ModelBox
metadata: {name: box}
spec:
  image: docker.io/library/busybox:1.37
  replicas: 1
---
apiVersion: batch.deckhand.dev/v1
kind: JobWatcher
metadata: {name: jw}
spec:
  ttlSecondsAfterSucceeded: 3600
---
apiVersion: batch.deckhand.dev/v1
kind: ClusterJobWatcher
metadata: {name: upgrade-cjw}
spec:
  ttlSecondsAfterFailed: 3600
  dryRun: true
`

// Check runs the previous release's manager on c (installed with the
// previous release), creates one object of every kind, stops it, calls
// upgrade (which must leave the current release installed), runs the
// current manager, and checks what an upgrade must keep.
func Check(t *testing.T, c *cluster.Cluster, upgrade func(g Gomega)) {
	g := NewWithT(t)
	g.SetDefaultEventuallyTimeout(2 * time.Minute)
	g.SetDefaultEventuallyPollingInterval(250 * time.Millisecond)
	ctx := context.Background()
	if missing != nil {
		t.Skipf("skipped: %v", missing)
	}
	previous, err := PreviousRelease()
	g.Expect(err).NotTo(HaveOccurred())
	flags := []string{"--podbugger-allowed-images", "docker.io/library/busybox:*"}
	ns := c.Namespace(t, map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"})
	t.Cleanup(func() { _, _ = c.Kubectl("delete", "clusterjobwatcher", "upgrade-cjw", "--ignore-not-found") })

	// The previous release is what is installed: its manager Deployment
	// names its image (the tests run its binary on the host).
	previousVersion, err := previous.Version()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(managerImage(g, c)).To(Equal(image+":"+previousVersion), "the installed release")

	// The previous release runs and keeps its objects.
	old := c.RunManagerFrom(t, previous.Manager(), previous.WebhookManifests(), flags...)
	file := filepath.Join(t.TempDir(), "objects.yaml")
	g.Expect(os.WriteFile(file, []byte(objects), 0o600)).To(Succeed())
	g.Expect(c.Kubectl("apply", "-n", ns, "-f", file)).Error().NotTo(HaveOccurred())
	setKey := types.NamespacedName{Namespace: ns, Name: "web"}
	g.Eventually(func(g Gomega) []string {
		set := &unstructured.Unstructured{}
		set.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps.deckhand.dev", Version: "v1alpha1", Kind: "PodSet"})
		g.Expect(c.Client.Get(ctx, setKey, set)).To(Succeed())
		nodes, _, _ := unstructured.NestedStringSlice(set.Object, "status", "nodes")
		return nodes
	}).Should(HaveLen(3))
	before := podUIDs(g, c, ns)
	g.Expect(before).To(HaveLen(3))
	deployment := &appsv1.Deployment{}
	g.Eventually(func() error { return c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "box"}, deployment) }).Should(Succeed())
	// A finished Job the JobWatcher keeps for an hour.
	job := &batchv1.Job{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "done"}, Spec: batchv1.JobSpec{
		Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "main", Image: "docker.io/library/busybox:1.37"}}}}}}
	g.Expect(c.Client.Create(ctx, job)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(job), job)).To(Succeed())
		g.Expect(job.Status.CompletionTime).NotTo(BeNil())
	}).Should(Succeed())
	old.Stop()

	// The upgrade. What RunManagerFrom pointed at the out-of-cluster
	// manager (a URL) is put back as the install had it first: in a real
	// cluster the webhook configuration and the CRDs' conversion webhook
	// name the Service, and a URL beside a Service is refused.
	g.Expect(c.Kubectl("delete", "validatingwebhookconfiguration", "deckhand-validating-webhook-configuration")).Error().NotTo(HaveOccurred())
	for _, crd := range convertedCRDs {
		g.Expect(c.Kubectl("patch", "crd", crd, "--type=merge", "-p", `{"spec":{"conversion":{"webhook":{"clientConfig":{"url":null,`+
			`"service":{"name":"deckhand-webhook-service","namespace":"`+cluster.Namespace+`","path":"/convert"}}}}}}`)).Error().NotTo(HaveOccurred())
	}
	upgrade(g)
	// The upgrade installs the current release's image, by its version.
	root, err := testenv.RepoRoot()
	g.Expect(err).NotTo(HaveOccurred())
	version, err := os.ReadFile(filepath.Join(root, "VERSION"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(managerImage(g, c)).To(Equal(image+":v"+strings.TrimSpace(string(version))), "the upgraded release")
	// The previous release stored PodSets and PodBuggers as v1beta1, the
	// v1alpha1 manifests above too: until the new manager serves the
	// conversion webhook they read only as v1beta1, and nothing needs
	// migrating (storedVersions is v1beta1 alone).
	g.Eventually(func() error { return c.Client.Get(ctx, setKey, &appsv1beta1.PodSet{}) }).Should(Succeed())
	g.Expect(c.Client.Get(ctx, setKey, &appsv1alpha1.PodSet{})).NotTo(Succeed(), "read as v1alpha1 without a conversion webhook")
	for _, crd := range convertedCRDs {
		g.Expect(c.Kubectl("get", "crd", crd, "-o", "jsonpath={.status.storedVersions}")).To(Equal(`["v1beta1"]`), crd)
	}

	current := c.RunManager(t, flags...)

	// Every object is served in every version it has, with the same values:
	// as soon as the apiserver has seen the CA the manager injected into the
	// CRDs (its CRD informer lags the write by a moment).
	set := &appsv1beta1.PodSet{}
	g.Eventually(func() error { return c.Client.Get(ctx, setKey, set) }).Should(Succeed())
	g.Expect(set.Spec.Replicas).To(Equal(int32(3)))
	g.Expect(set.Spec.UpdateStrategy.RollingUpdate.MaxSurge.IntValue()).To(Equal(1))
	g.Expect(c.Client.Get(ctx, setKey, &appsv1alpha1.PodSet{})).To(Succeed())
	pbKey := types.NamespacedName{Namespace: ns, Name: "dbg"}
	pb := &debugv1beta1.PodBugger{}
	g.Expect(c.Client.Get(ctx, pbKey, pb)).To(Succeed())
	g.Expect(pb.Spec.MaxPods).To(Equal(int32(2)))
	g.Expect(c.Client.Get(ctx, pbKey, &debugv1alpha1.PodBugger{})).To(Succeed())
	g.Expect(c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "box"}, &modelv1.ModelBox{})).To(Succeed())
	g.Expect(c.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: "jw"}, &deckhandbatchv1.JobWatcher{})).To(Succeed())
	g.Expect(c.Client.Get(ctx, types.NamespacedName{Name: "upgrade-cjw"}, &deckhandbatchv1.ClusterJobWatcher{})).To(Succeed())

	// The new controllers take over what the old ones made: scaled to 4
	// through v1beta1, the PodSet adds one pod and keeps the three it had,
	// all counted as made from the current template (nothing to roll); the
	// ModelBox keeps its Deployment.
	// A merge patch, not an update: the new controller may be writing the
	// status at the same moment.
	g.Expect(c.Client.Patch(ctx, set, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":4}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) int32 {
		g.Expect(c.Client.Get(ctx, setKey, set)).To(Succeed())
		g.Expect(set.Status.ObservedGeneration).To(Equal(set.Generation))
		g.Expect(set.Status.Replicas).To(Equal(int32(4)))
		return set.Status.UpdatedReplicas
	}).Should(Equal(int32(4)))
	after := podUIDs(g, c, ns)
	g.Expect(after).To(HaveLen(4))
	for _, uid := range before {
		g.Expect(after).To(ContainElement(uid), "a pod of the previous release was replaced")
	}
	// A template change rolls one pod at a time: with maxSurge 1 and
	// maxUnavailable 0, 4 ready pods at every moment. Blind to the old
	// pods' readiness, the manager deleted all of them in one step.
	// The previous release's pods are seen as they are: Running and Ready,
	// so the PodSet is Available with 4 ready pods, in a status the new
	// manager computed (for the generation of the scale-up). Cached slimmed
	// (as when their owner reference named v1alpha1), they showed unready:
	// ready 1 of 4 (the new pod), Available=False.
	g.Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(ctx, setKey, set)).To(Succeed())
		g.Expect(set.Status.ObservedGeneration).To(Equal(set.Generation))
		g.Expect(set.Status.ReadyReplicas).To(Equal(int32(4)))
		g.Expect(meta.IsStatusConditionTrue(set.Status.Conditions, appsv1beta1.ConditionAvailable)).To(BeTrue(), "Available")
	}).Should(Succeed())
	fewest := watchReady(ctx, c, ns)
	g.Expect(c.Client.Patch(ctx, set, client.RawPatch(types.MergePatchType, []byte(
		`{"spec":{"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"busybox","image":"docker.io/library/busybox:1.37","command":["sleep","3600"]}]}}}}`)))).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Client.Get(ctx, setKey, set)).To(Succeed())
		g.Expect(set.Status.ObservedGeneration).To(Equal(set.Generation))
		g.Expect(set.Status.UpdatedReplicas).To(Equal(int32(4)))
		g.Expect(set.Status.Replicas).To(Equal(int32(4)))
		g.Expect(set.Status.ReadyReplicas).To(Equal(int32(4)))
	}).Should(Succeed())
	g.Expect(fewest()).To(BeNumerically(">=", 4), "ready pods dropped below replicas during a rollout with maxUnavailable 0")

	box := &appsv1.Deployment{}
	g.Expect(c.Client.Get(ctx, client.ObjectKeyFromObject(deployment), box)).To(Succeed())
	g.Expect(box.UID).To(Equal(deployment.UID), "the ModelBox's Deployment was replaced")
	// The new JobWatcher has judged the finished Job by now (the PodSet's
	// scale-up took longer than its first sync): it is not due for an hour.
	g.Consistently(func() error { return c.Client.Get(ctx, client.ObjectKeyFromObject(job), &batchv1.Job{}) }).
		WithTimeout(5*time.Second).Should(Succeed(), "a Job was deleted before its TTL")

	// Still stored as v1beta1 after the new manager wrote them: with no
	// manager (no conversion webhook), they read as v1beta1 only.
	current.Stop()
	g.Expect(c.Client.Get(ctx, setKey, &appsv1beta1.PodSet{})).To(Succeed())
	g.Expect(c.Client.Get(ctx, pbKey, &debugv1beta1.PodBugger{})).To(Succeed())
	g.Expect(c.Client.Get(ctx, setKey, &appsv1alpha1.PodSet{})).NotTo(Succeed(), "read as v1alpha1 without a conversion webhook")
}

// image is the manager's image repository in the install and the chart.
const image = "ghcr.io/deckhand-dev/deckhand"

// managerImage is the image of the installed manager Deployment.
func managerImage(g Gomega, c *cluster.Cluster) string {
	deployment := &appsv1.Deployment{}
	g.Expect(c.Client.Get(context.Background(), types.NamespacedName{Namespace: cluster.Namespace, Name: "deckhand-controller-manager"}, deployment)).To(Succeed())
	g.Expect(deployment.Spec.Template.Spec.Containers).NotTo(BeEmpty())
	return deployment.Spec.Template.Spec.Containers[0].Image
}

// convertedCRDs are the CRDs whose versions the manager's webhook converts.
var convertedCRDs = []string{"podsets.apps.deckhand.dev", "podbuggers.debug.deckhand.dev"}

// watchReady polls the ready pods of the PodSet web that are not being
// deleted, until the returned function is called; it returns the fewest
// seen.
func watchReady(ctx context.Context, c *cluster.Cluster, ns string) (fewest func() int) {
	ctx, cancel := context.WithCancel(ctx)
	least := make(chan int, 1)
	go func() {
		low := math.MaxInt
		for ctx.Err() == nil {
			pods := &corev1.PodList{}
			if c.Client.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{appsv1beta1.PodSetLabel: "web"}) == nil {
				ready := 0
				for _, p := range pods.Items {
					for _, cond := range p.Status.Conditions {
						if p.DeletionTimestamp == nil && cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
							ready++
						}
					}
				}
				low = min(low, ready)
			}
			time.Sleep(50 * time.Millisecond)
		}
		least <- low
	}()
	return func() int { cancel(); return <-least }
}

// podUIDs are the UIDs of the PodSet web's pods that are not being deleted.
func podUIDs(g Gomega, c *cluster.Cluster, ns string) []types.UID {
	pods := &corev1.PodList{}
	g.Expect(c.Client.List(context.Background(), pods, client.InNamespace(ns),
		client.MatchingLabels{appsv1beta1.PodSetLabel: "web"})).To(Succeed())
	var uids []types.UID
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			uids = append(uids, p.UID)
		}
	}
	slices.Sort(uids)
	return uids
}
