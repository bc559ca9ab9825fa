package jobwatcher

import (
	"cmp"
	"context"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	"github.com/deckhand-dev/deckhand/internal/redact"
)

// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get

// defaultFailureRecords is how many failure records a watcher keeps when
// spec.failureRecords is unset.
const defaultFailureRecords = 5

// logsTimeout bounds the time spent reading the logs of one failed Job, so
// that a node that cannot serve them (kwok's simulated nodes, a node that is
// gone) holds up its deletion only briefly.
const logsTimeout = 3 * time.Second

// PodLogs reads the end of one container's log.
type PodLogs func(ctx context.Context, namespace, pod, container string) (string, error)

// ClientsetLogs reads logs through cs, at most MaxLogTailLines lines and
// MaxLogTailBytes bytes of each.
func ClientsetLogs(cs kubernetes.Interface) PodLogs {
	return func(ctx context.Context, namespace, pod, container string) (string, error) {
		raw, err := cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{
			Container:  container,
			TailLines:  ptr.To[int64](deckhandbatchv1.MaxLogTailLines),
			LimitBytes: ptr.To[int64](deckhandbatchv1.MaxLogTailBytes),
		}).DoRaw(ctx)
		return string(raw), err
	}
}

// failureRecords is how many failure records the watcher keeps.
func (p *compiledWatcher) failureRecords() int {
	if p.spec.FailureRecords == nil {
		return defaultFailureRecords
	}
	return int(*p.spec.FailureRecords)
}

// recordFailure collects, before a failed Job is deleted, why it failed:
// its pods, read past the cache by the Job's controller-uid label, and,
// unless withLogs is false, the end of their failed containers' logs. It
// never fails: what cannot be read is left out (pods) or noted (logs).
//
// A ClusterJobWatcher's records are read without logs: its status is
// cluster-scoped, readable by whoever may read the watcher, and a tenant's
// log is not theirs to read; the Job, its pods, exit codes and reasons are.
func (r *JobReconciler) recordFailure(ctx context.Context, job *batchv1.Job, now time.Time, withLogs bool) deckhandbatchv1.FailureRecord {
	var pods corev1.PodList
	if err := r.APIReader.List(ctx, &pods, client.InNamespace(job.Namespace),
		client.MatchingLabels{batchv1.ControllerUidLabel: string(job.UID)}); err != nil {
		logf.FromContext(ctx).Info("failure record without pods: listing them failed", "job", klog.KObj(job), "error", err.Error())
	}
	rec := failureRecord(job, pods.Items, now)
	if r.Logs == nil || !withLogs {
		return rec
	}
	ctx, cancel := context.WithTimeout(ctx, logsTimeout)
	defer cancel()
	for i := range rec.Pods {
		for j := range rec.Pods[i].Containers {
			c := &rec.Pods[i].Containers[j]
			c.LogTail, c.LogError = logTail(r.Logs(ctx, job.Namespace, rec.Pods[i].Name, c.Name))
		}
	}
	return rec
}

// failureRecord is the record of a failed Job with its pods, deleted at
// deletedAt, without logs.
func failureRecord(job *batchv1.Job, pods []corev1.Pod, deletedAt time.Time) deckhandbatchv1.FailureRecord {
	rec := deckhandbatchv1.FailureRecord{Job: job.Name, Namespace: job.Namespace, UID: job.UID,
		DeletedAt: metav1.NewTime(deletedAt).Rfc3339Copy()}
	for _, c := range job.Status.Conditions {
		if c.Type == batchv1.JobFailed && c.Status == corev1.ConditionTrue {
			rec.FailedAt, rec.Reason, rec.Message = c.LastTransitionTime, c.Reason, shorten(c.Message)
		}
	}
	failed := slices.DeleteFunc(slices.Clone(pods), func(p corev1.Pod) bool { return !podFailed(&p) })
	slices.SortFunc(failed, func(a, b corev1.Pod) int {
		return cmp.Or(b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	for i := range failed[:min(len(failed), deckhandbatchv1.MaxFailedPods)] {
		rec.Pods = append(rec.Pods, podFailure(&failed[i]))
	}
	return rec
}

// podFailed reports whether the pod failed or one of its containers ended
// with an error.
func podFailed(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodFailed || len(containerFailures(p)) > 0
}

func podFailure(p *corev1.Pod) deckhandbatchv1.PodFailure {
	return deckhandbatchv1.PodFailure{Name: p.Name, Node: p.Spec.NodeName, Reason: p.Status.Reason,
		Message: shorten(p.Status.Message), Containers: containerFailures(p)}
}

// containerFailures are the pod's containers (init containers first) whose
// last termination had a non-zero exit code, at most MaxFailedContainers.
func containerFailures(p *corev1.Pod) []deckhandbatchv1.ContainerFailure {
	var out []deckhandbatchv1.ContainerFailure
	for _, s := range slices.Concat(p.Status.InitContainerStatuses, p.Status.ContainerStatuses) {
		term := s.State.Terminated
		if term == nil {
			term = s.LastTerminationState.Terminated
		}
		if term == nil || term.ExitCode == 0 || len(out) == deckhandbatchv1.MaxFailedContainers {
			continue
		}
		out = append(out, deckhandbatchv1.ContainerFailure{Name: s.Name, ExitCode: term.ExitCode,
			Reason: term.Reason, Message: shorten(term.Message)})
	}
	return out
}

// logTail keeps the end of a log, its credentials removed (redact), at
// most MaxLogTailLines lines and MaxLogTailBytes bytes, or says shortly why
// there is none.
func logTail(log string, err error) (tail, why string) {
	if err != nil {
		return "", shorten(err.Error())
	}
	lines := strings.Split(strings.TrimRight(redact.String(log), "\n"), "\n")
	tail = strings.Join(lines[max(0, len(lines)-deckhandbatchv1.MaxLogTailLines):], "\n")
	for len(tail) > deckhandbatchv1.MaxLogTailBytes {
		_, size := utf8.DecodeRuneInString(tail)
		tail = tail[size:]
	}
	return tail, ""
}

// shorten removes the credentials s shows (redact) and cuts it to
// MaxMessageLength bytes, on a rune boundary.
func shorten(s string) string {
	s = redact.String(s)
	if len(s) <= deckhandbatchv1.MaxMessageLength {
		return s
	}
	cut := deckhandbatchv1.MaxMessageLength - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// mergeFailures adds to old the records of added it does not hold yet
// (one per Job UID), newest deletion first, and keeps the first limit.
func mergeFailures(old, added []deckhandbatchv1.FailureRecord, limit int) []deckhandbatchv1.FailureRecord {
	out := slices.Clone(old)
	for _, f := range added {
		if !slices.ContainsFunc(out, sameJob(f)) {
			out = append(out, f)
		}
	}
	slices.SortStableFunc(out, func(a, b deckhandbatchv1.FailureRecord) int {
		return cmp.Or(b.DeletedAt.Compare(a.DeletedAt.Time), cmp.Compare(a.Namespace+"/"+a.Job, b.Namespace+"/"+b.Job))
	})
	if out = out[:min(len(out), limit)]; len(out) == 0 {
		return nil
	}
	return out
}

func sameJob(f deckhandbatchv1.FailureRecord) func(deckhandbatchv1.FailureRecord) bool {
	return func(g deckhandbatchv1.FailureRecord) bool { return g.UID == f.UID }
}
