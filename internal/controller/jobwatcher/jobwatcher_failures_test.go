package jobwatcher

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
)

func testPod(name string, created int, phase corev1.PodPhase, exits ...int32) corev1.Pod {
	p := corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, CreationTimestamp: metav1.NewTime(finishedAt.Add(time.Duration(created) * time.Second))},
		Spec: corev1.PodSpec{NodeName: "node-" + name}, Status: corev1.PodStatus{Phase: phase}}
	for i, code := range exits {
		p.Status.ContainerStatuses = append(p.Status.ContainerStatuses, corev1.ContainerStatus{Name: fmt.Sprintf("c%d", i),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code, Reason: "Error"}}})
	}
	return p
}

func TestFailureRecord(t *testing.T) {
	deletedAt := finishedAt.Add(time.Hour)
	job := testJob("ns", "etl", failed)
	job.UID = "u1"
	job.Status.Conditions[0].Reason, job.Status.Conditions[0].Message = "DeadlineExceeded", strings.Repeat("x", 300)
	base := deckhandbatchv1.FailureRecord{Job: "etl", Namespace: "ns", UID: "u1", FailedAt: metav1.NewTime(finishedAt),
		DeletedAt: metav1.NewTime(deletedAt), Reason: "DeadlineExceeded", Message: strings.Repeat("x", 253) + "…"}
	failure := func(name string, exits ...int32) deckhandbatchv1.PodFailure {
		f := deckhandbatchv1.PodFailure{Name: name, Node: "node-" + name}
		for i, code := range exits {
			f.Containers = append(f.Containers, deckhandbatchv1.ContainerFailure{Name: fmt.Sprintf("c%d", i), ExitCode: code, Reason: "Error"})
		}
		return f
	}
	tests := map[string]struct {
		pods []corev1.Pod
		want []deckhandbatchv1.PodFailure
	}{
		"no pods left": {nil, nil},
		"succeeded and running pods are left out": {
			[]corev1.Pod{testPod("ok", 1, corev1.PodSucceeded, 0), testPod("run", 2, corev1.PodRunning), testPod("bad", 3, corev1.PodFailed, 1)},
			[]deckhandbatchv1.PodFailure{failure("bad", 1)}},
		"a running pod whose container failed is kept": {[]corev1.Pod{testPod("restarting", 1, corev1.PodRunning, 137)},
			[]deckhandbatchv1.PodFailure{failure("restarting", 137)}},
		"only failed containers, at most 3": {[]corev1.Pod{testPod("many", 1, corev1.PodFailed, 1, 0, 2, 3, 4)},
			[]deckhandbatchv1.PodFailure{{Name: "many", Node: "node-many", Containers: []deckhandbatchv1.ContainerFailure{
				{Name: "c0", ExitCode: 1, Reason: "Error"}, {Name: "c2", ExitCode: 2, Reason: "Error"}, {Name: "c3", ExitCode: 3, Reason: "Error"}}}}},
		"the newest 3 failed pods": {
			[]corev1.Pod{testPod("p1", 1, corev1.PodFailed, 1), testPod("p4", 4, corev1.PodFailed, 1), testPod("p2", 2, corev1.PodFailed, 1), testPod("p3", 3, corev1.PodFailed, 1)},
			[]deckhandbatchv1.PodFailure{failure("p4", 1), failure("p3", 1), failure("p2", 1)}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			want := base
			want.Pods = tc.want
			if got := failureRecord(job, tc.pods, deletedAt); !equality.Semantic.DeepEqual(got, want) {
				t.Errorf("failureRecord =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

// What a failed Job's pods printed is kept without the credentials in it:
// the record lives in the watcher's status, in etcd, readable by whoever
// reads the watcher.
func TestAFailureRecordKeepsNoCredential(t *testing.T) {
	const token = "eyJhbGciOiJSUzI1NiJ9.eyJzdWIiOiJzeXN0ZW06c2VydmljZWFjY291bnQifQ.c2lnbmF0dXJl"
	tail, _ := logTail("connecting\nAuthorization: Bearer "+token+"\npassword=hunter2hunter2\n", nil)
	if strings.Contains(tail, token) || strings.Contains(tail, "hunter2") || !strings.Contains(tail, "[REDACTED:") {
		t.Errorf("log tail kept a credential: %q", tail)
	}
	pod := testPod("bad", 1, corev1.PodFailed, 1)
	pod.Status.ContainerStatuses[0].State.Terminated.Message = "db login failed with password=hunter2hunter2"
	pod.Status.Message = "token " + token
	f := podFailure(&pod)
	if got := f.Message + f.Containers[0].Message; strings.Contains(got, "hunter2") || strings.Contains(got, token) {
		t.Errorf("messages kept a credential: %q, %q", f.Message, f.Containers[0].Message)
	}
}

func TestLogTail(t *testing.T) {
	long := strings.Repeat("y", 600)
	tests := map[string]struct {
		log       string
		err       error
		tail, why string
	}{
		"short log":            {"a\nb\n", nil, "a\nb", ""},
		"the last 5 lines":     {"1\n2\n3\n4\n5\n6\n7\n", nil, "3\n4\n5\n6\n7", ""},
		"the last 512 bytes":   {long, nil, long[88:], ""},
		"no log, say why":      {"", errors.New("dial tcp 10.0.0.1:10250: connect: connection refused"), "", "dial tcp 10.0.0.1:10250: connect: connection refused"},
		"a long reason, short": {"", errors.New(long), "", strings.Repeat("y", 253) + "…"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if tail, why := logTail(tc.log, tc.err); tail != tc.tail || why != tc.why {
				t.Errorf("logTail = %q, %q; want %q, %q", tail, why, tc.tail, tc.why)
			}
		})
	}
}

func TestMergeFailures(t *testing.T) {
	rec := func(uid string, minutes int) deckhandbatchv1.FailureRecord {
		return deckhandbatchv1.FailureRecord{Job: uid, UID: types.UID(uid), DeletedAt: metav1.NewTime(finishedAt.Add(time.Duration(minutes) * time.Minute))}
	}
	tests := map[string]struct {
		old, added []deckhandbatchv1.FailureRecord
		limit      int
		want       []deckhandbatchv1.FailureRecord
	}{
		"nothing":              {nil, nil, 5, nil},
		"newest first":         {[]deckhandbatchv1.FailureRecord{rec("a", 1)}, []deckhandbatchv1.FailureRecord{rec("b", 2)}, 5, []deckhandbatchv1.FailureRecord{rec("b", 2), rec("a", 1)}},
		"once per Job":         {[]deckhandbatchv1.FailureRecord{rec("a", 1)}, []deckhandbatchv1.FailureRecord{rec("a", 1)}, 5, []deckhandbatchv1.FailureRecord{rec("a", 1)}},
		"bounded by the limit": {[]deckhandbatchv1.FailureRecord{rec("a", 1), rec("b", 2)}, []deckhandbatchv1.FailureRecord{rec("c", 3)}, 2, []deckhandbatchv1.FailureRecord{rec("c", 3), rec("b", 2)}},
		"a limit of 0 clears":  {[]deckhandbatchv1.FailureRecord{rec("a", 1)}, nil, 0, nil},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := mergeFailures(tc.old, tc.added, tc.limit); !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("mergeFailures = %+v, want %+v", got, tc.want)
			}
		})
	}
}
