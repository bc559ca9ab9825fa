package main

import (
	"flag"
	"io"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	jobwatchercontroller "github.com/deckhand-dev/deckhand/internal/controller/jobwatcher"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
)

func TestFlagsGoAnywhereAmongTheArguments(t *testing.T) {
	for _, args := range [][]string{{"web", "-n", "team"}, {"-n", "team", "web"}, {"--namespace=team", "web"}} {
		fs := flag.NewFlagSet("x", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		ns := fs.String("n", "", "")
		fs.StringVar(ns, "namespace", "", "")
		rest, err := parseInterspersed(fs, args)
		if err != nil || *ns != "team" || !slices.Equal(rest, []string{"web"}) {
			t.Errorf("%q: namespace %q, arguments %q, %v; want team, [web]", args, *ns, rest, err)
		}
	}
}

func TestRowOfSaysWhatMatters(t *testing.T) {
	obj := func(generation int64, conditions ...map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{"name": "x", "namespace": "ns", "generation": generation}}}
		list := make([]any, 0, len(conditions))
		for _, c := range conditions {
			list = append(list, c)
		}
		_ = unstructured.SetNestedSlice(u.Object, list, "status", "conditions")
		return u
	}
	cond := func(typ, status, reason, message string, observed int64) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": reason, "message": message, "observedGeneration": observed, "lastTransitionTime": "2026-11-29T00:00:00Z"}
	}
	tests := map[string]struct {
		obj  *unstructured.Unstructured
		want statusRow
	}{
		"ready": {obj(1, cond("Ready", "True", "Available", "3 of 3", 1), cond("Stalled", "False", "Progressing", "", 1)),
			statusRow{ready: "True", stalled: "False", reason: "Available", message: "3 of 3"}},
		"stalled says why, over ready": {obj(1, cond("Ready", "False", "Progressing", "1 of 3", 1), cond("Stalled", "True", "ReplicaFailure", "quota exceeded", 1)),
			statusRow{ready: "False", stalled: "True", reason: "ReplicaFailure", message: "quota exceeded"}},
		"not observed yet": {obj(1), statusRow{ready: "Unknown", stalled: "False", reason: "NotObserved", message: "Deckhand has not reported on it yet"}},
		"an older generation's verdict": {obj(3, cond("Ready", "True", "Available", "3 of 3", 2)),
			statusRow{ready: "True", stalled: "False", reason: "Available", message: "(for generation 2 of 3) 3 of 3"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := rowOf("PodSet", tt.obj)
			got.kind, got.namespace, got.name = "", "", ""
			if got != tt.want {
				t.Errorf("rowOf = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestVerdictText(t *testing.T) {
	now := time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		e    jobwatchercontroller.Explanation
		want string
	}{
		"due later":       {jobwatchercontroller.Explanation{Verdict: "Expires", TTL: time.Hour, Expiry: now.Add(90 * time.Minute)}, "goes at 2026-11-29T13:30:00Z (in 1h30m0s), 1h0m0s after it finished"},
		"due already":     {jobwatchercontroller.Explanation{Verdict: "Expires", TTL: time.Minute, Expiry: now.Add(-time.Second)}, "due since 2026-11-29T11:59:59Z"},
		"beyond history":  {jobwatchercontroller.Explanation{Verdict: "Expires", BeyondHistory: true}, "goes now: beyond the deciding watcher's history limit"},
		"no watcher":      {jobwatchercontroller.Explanation{Verdict: "Unwatched"}, "kept: no JobWatcher of its namespace and no ClusterJobWatcher matches it"},
		"no TTL for fail": {jobwatchercontroller.Explanation{Verdict: "NoTTL", Outcome: "Failed"}, "no TTL for a failed Job"},
	}
	for name, tt := range tests {
		if got := verdictText(tt.e, now); !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want it to say %q", name, got, tt.want)
		}
	}
}

func TestJudge(t *testing.T) {
	allow := func(globs ...string) *policy.Policy {
		images, err := policy.ParseImagePatterns(globs)
		if err != nil {
			t.Fatal(err)
		}
		return &policy.Policy{AllowedImages: images}
	}
	pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Name: "dbg"}, Spec: debugv1beta1.PodBuggerSpec{Image: "docker.io/library/busybox:1.36"}}
	running := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	host := &corev1.Pod{Spec: corev1.PodSpec{HostPID: true}, Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	optedIn := map[string]string{debugv1beta1.NamespaceEnabledLabel: "true"}
	recorder := pb.DeepCopy()
	recorder.Spec.Triggers = []debugv1beta1.Trigger{debugv1beta1.TriggerError}
	tests := map[string]struct {
		pb     *debugv1beta1.PodBugger
		pod    *corev1.Pod
		labels map[string]string
		policy *policy.Policy
		want   []string
	}{
		"nothing blocks it":          {pb, running, optedIn, allow("docker.io/library/busybox:*"), []string{"would add the ephemeral container", "nothing blocks it"}},
		"the namespace opts out":     {pb, running, nil, allow("docker.io/library/busybox:*"), []string{"blocked by " + debugv1beta1.ReasonNamespaceNotEnabled}},
		"an image not allowed":       {pb, running, optedIn, allow("registry.example.com/*"), []string{"blocked by " + debugv1beta1.ReasonImageNotAllowed}},
		"a pod that reaches host":    {pb, host, optedIn, allow("docker.io/library/busybox:*"), []string{"blocked by " + policy.ReasonHostAccess, "hostPID"}},
		"the policy is unknown":      {pb, running, optedIn, nil, []string{"not checked (the operator's policy is unknown"}},
		"a recorder injects nothing": {recorder, running, nil, nil, []string{"injects nothing"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := strings.Join(judge(tt.pb, tt.pod, tt.labels, tt.policy, nil), "\n")
			for _, w := range tt.want {
				if !strings.Contains(got, w) {
					t.Errorf("judge said:\n%s\nwant it to say %q", got, w)
				}
			}
		})
	}
}

// A record of several instances prints each instance's log, oldest first,
// under a line naming it, or why it has none, and the files each left.
func TestInstanceLogs(t *testing.T) {
	at := func(s int) metav1.Time { return metav1.NewTime(time.Date(2026, 11, 29, 8, 0, s, 0, time.UTC)) }
	got := instanceLogs([]debugv1beta1.IncidentInstance{
		{FailedInstance: debugv1beta1.FailedInstance{ExitCode: 1, Reason: "Error", FinishedAt: at(3), RestartCount: 2, ContainerID: "containerd://a"},
			LogError: "not read: the container failed again before this instance's log was read"},
		{FailedInstance: debugv1beta1.FailedInstance{ExitCode: 137, Reason: "OOMKilled", FinishedAt: at(9), RestartCount: 3, ContainerID: "containerd://b"},
			LogTail: "start\nout of memory", LogTruncated: true,
			Artifacts: []debugv1beta1.IncidentArtifact{
				{Name: "core.dump", Size: 25, SHA256: "fa93", Copy: ".deckhand/1795962459/core.dump"},
				{Name: "heap.bin", Size: 3072, SHA256: "e5a0", Truncated: true, Copy: ".deckhand/1795962459/heap.bin"},
				{Name: "secret.key", Size: 40, Error: "not readable by the debug container's user"}},
			ArtifactsError: "1 more files not listed: a record lists at most 16 an instance"},
	})
	want := `=== instance 1 of 2: exit 1 (Error), finished 2026-11-29T08:00:03Z, restart 2, containerd://a ===
(no log: not read: the container failed again before this instance's log was read)
=== instance 2 of 2: exit 137 (OOMKilled), finished 2026-11-29T08:00:09Z, restart 3, containerd://b ===
start
out of memory
(the log was longer: this is its tail)
--- artifact core.dump: 25 bytes, sha256 fa93, copy /deckhand-artifacts/.deckhand/1795962459/core.dump
--- artifact heap.bin: 3072 bytes (its start kept), sha256 e5a0, copy /deckhand-artifacts/.deckhand/1795962459/heap.bin
--- artifact secret.key: 40 bytes, not readable by the debug container's user
--- artifacts: 1 more files not listed: a record lists at most 16 an instance
`
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// status lists the kinds discovery shows in the category deckhand with a
// status subresource, in their preferred version: a kind installed later
// too, not a record without status, nor another group's kind (whose group
// is not even asked for its resources).
func TestStatusKindsComeFromDiscovery(t *testing.T) {
	lists := []*metav1.APIResourceList{
		{GroupVersion: "apps.deckhand.dev/v1beta1", APIResources: []metav1.APIResource{
			{Name: "podsets", Kind: "PodSet", Namespaced: true, Categories: []string{"deckhand"}},
			{Name: "podsets/status", Kind: "PodSet", Namespaced: true},
			{Name: "podsets/scale", Kind: "Scale", Namespaced: true},
		}},
		{GroupVersion: "debug.deckhand.dev/v1beta1", APIResources: []metav1.APIResource{
			{Name: "podincidents", Kind: "PodIncident", Namespaced: true, Categories: []string{"deckhand"}},
		}},
		{GroupVersion: "tinker.deckhand.dev/v1alpha1", APIResources: []metav1.APIResource{
			{Name: "gizmos", Kind: "Gizmo", Namespaced: false, Categories: []string{"deckhand"}},
			{Name: "gizmos/status", Kind: "Gizmo"},
		}},
		{GroupVersion: "apps/v1", APIResources: []metav1.APIResource{
			{Name: "deployments", Kind: "Deployment", Namespaced: true, Categories: []string{"all"}},
			{Name: "deployments/status", Kind: "Deployment", Namespaced: true},
		}},
	}
	// As the apiserver's discovery serves them: subresources in each
	// group version's list, which ServerPreferredResources drops.
	fake := &fakediscovery.FakeDiscovery{Fake: &clienttesting.Fake{Resources: lists}}
	served, err := deckhandResources(fake)
	if err != nil {
		t.Fatal(err)
	}
	got := statusKinds(served)
	want := []statusKind{
		{gvk: schema.GroupVersionKind{Group: "tinker.deckhand.dev", Version: "v1alpha1", Kind: "Gizmo"}, cluster: true},
		{gvk: schema.GroupVersionKind{Group: "apps.deckhand.dev", Version: "v1beta1", Kind: "PodSet"}},
	}
	if !slices.Equal(got, want) {
		t.Errorf("statusKinds = %v, want %v", got, want)
	}
}
