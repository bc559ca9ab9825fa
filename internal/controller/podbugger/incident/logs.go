package incident

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/record"
)

// A record is written the moment a failure is seen, without its log; the
// log is read afterwards, by a small pool of its own, and written into the
// record by a second update. A kubelet that does not answer (a node down,
// or kwok's) then delays only the logs of its own pods, never another pod's
// record: with the log read before the write, the bench's crash loop on 100
// silent kwok nodes counted 702 of 2,000 failures. The failed instance's log
// stays readable (previous=true) until the container fails again, which the
// kubelet's backoff spaces out by 10 s or more.
const (
	// logReaders is how many log reads run at once: each holds one
	// goroutine and, while it streams, a buffer of about 2*logTailBytes.
	logReaders = 16
	// logReadersPerNamespace is how many of them one namespace's reads may
	// hold at once: a tenant whose kubelets answer slowly (or never, each
	// read waiting out logsTimeout) leaves the others a few.
	logReadersPerNamespace = logReaders * 3 / 4
	// maxQueuedLogReads bounds the log reads waiting for a reader (each a
	// few hundred bytes), and maxQueuedLogReadsPerNamespace those of one
	// namespace: failures beyond them are recorded with a note instead of
	// a log, however many pods a tenant makes crash, and the readers take
	// the namespaces in turn (fairQueue).
	maxQueuedLogReads             = 1024
	maxQueuedLogReadsPerNamespace = maxQueuedLogReads / 4
)

// logJob is the log read a record waits for: whose log, and which state of
// which record it belongs to (count and lastTime: a record that counted a
// later failure meanwhile waits for that failure's log, not this one's).
type logJob struct {
	pod       types.NamespacedName
	podUID    types.UID
	node      string
	container string
	// instanceID is the failed instance's container ID; empty for a
	// failure without one (NotReady, Evicted), whose current log is read.
	instanceID string
	// previous says the instance was the container's previous one when the
	// failure was seen (its log is read with previous=true).
	previous bool
	// debugger names the PodBugger's debug container when it has started
	// in the pod: its log is read as well.
	debugger string
	// collector names the debug container collecting the instance's
	// artifacts (spec.incidents.artifacts), empty when none are; started
	// and finished are the instance's life, which the files' mtimes are
	// tested against.
	collector         string
	started, finished metav1.Time
	limit             int
	// scrub cleans what is read of the tenant's text.
	scrub scrub

	record   types.NamespacedName
	count    int32
	lastTime metav1.Time
	// slot is the index of the instance in the record's instances whose
	// log this is (-1: none). The record's count, tested with it, keeps
	// the index: a record that counted nothing since added no instance.
	slot int
}

// slotOf is the index of the last of inc's instances when it is the
// instance id (a container ID), else -1.
func slotOf(inc *debugv1beta1.PodIncident, id string) int {
	last := len(inc.Spec.Instances) - 1
	if id == "" || last < 0 || inc.Spec.Instances[last].ContainerID != id {
		return -1
	}
	return last
}

// logQueue is the bounded queue of log reads, a fairQueue by the pod's
// namespace. A place is reserved before the record is written (a full queue
// is known before the write, and said in the record) and freed when its
// read is done or its record not written.
type logQueue struct {
	*fairQueue[logJob]
	mu sync.Mutex
	// records are the records whose jobs are queued or being read.
	records map[types.NamespacedName]struct{}
}

func newLogQueue(n, perNamespace, readers int) *logQueue {
	return &logQueue{fairQueue: newFairQueue[logJob](n, perNamespace, readers), records: map[types.NamespacedName]struct{}{}}
}

// submit queues j in the place reserved for it.
func (q *logQueue) submit(j logJob) {
	q.mu.Lock()
	q.records[j.record] = struct{}{}
	q.mu.Unlock()
	q.fairQueue.submit(j.pod.Namespace, j)
}

// done frees j's place once its read is over.
func (q *logQueue) done(j logJob) {
	q.mu.Lock()
	delete(q.records, j.record)
	q.mu.Unlock()
	q.finish(j.pod.Namespace)
}

// reading reports whether a job of this process will write the log of the
// record key.
func (q *logQueue) reading(key types.NamespacedName) bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	_, ok := q.records[key]
	return ok
}

// readLogs runs the pool's readers until ctx ends. It runs only on the
// leader (a manager Runnable), as the recorder's workers do.
func (r *IncidentReconciler) readLogs(ctx context.Context) error {
	var wg sync.WaitGroup
	for range logReaders {
		wg.Go(func() {
			for {
				j, _, ok := r.logQueue.next(ctx)
				if !ok {
					return
				}
				r.fillLog(ctx, j)
				r.logQueue.done(j)
			}
		})
	}
	wg.Wait()
	return nil
}

// The operations of the JSON patches the recorder writes.
const (
	opTest   = "test"
	opAdd    = "add"
	opRemove = "remove"

	// Paths the patches test and write.
	pathCount    = "/spec/count"
	pathLogError = "/spec/logError"
)

// patchOp is one operation of a JSON patch (RFC 6902).
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

// logsRead is what a log job read: the failed instance's log or why not,
// and the debug container's output.
type logsRead struct {
	tail, note string
	truncated  bool
	debug      *debugv1beta1.IncidentDebugContainer
	artifacts  *artifactsRead
}

// fillLog reads j's logs and writes them into j's record, unless the record
// has counted another failure since (or is gone): that failure's own job
// fills it.
func (r *IncidentReconciler) fillLog(ctx context.Context, j logJob) {
	got := r.readJobLogs(ctx, j)
	ops := []patchOp{
		{opTest, pathCount, j.count},
		{opTest, "/spec/lastTime", j.lastTime},
		// Not written yet: a read queued again after a restart must not
		// replace a log its first read wrote.
		{opTest, pathLogError, record.PendingLogNote},
		{opAdd, "/spec/logTail", got.tail},
		{opAdd, "/spec/logTruncated", got.truncated},
		{opAdd, pathLogError, j.scrub.clean(got.note, debugv1beta1.MaxIncidentMessage)},
	}
	if got.debug != nil {
		ops = append(ops, patchOp{opAdd, "/spec/debugContainer", got.debug})
	}
	if j.slot >= 0 {
		// The instance's own slot, tested to be that instance.
		at := fmt.Sprintf("/spec/instances/%d", j.slot)
		ops = append(ops, patchOp{opTest, at + "/containerID", j.instanceID},
			patchOp{opAdd, at + "/logTail", got.tail}, patchOp{opAdd, at + "/logTruncated", got.truncated},
			patchOp{opAdd, at + "/logError", j.scrub.clean(got.note, debugv1beta1.MaxIncidentMessage)})
		if got.artifacts != nil {
			ops = append(ops, patchOp{opAdd, at + "/artifacts", got.artifacts.files},
				patchOp{opAdd, at + "/artifactsError", cut(got.artifacts.note, debugv1beta1.MaxIncidentMessage)})
		}
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return
	}
	inc := &debugv1beta1.PodIncident{ObjectMeta: metav1.ObjectMeta{Namespace: j.record.Namespace, Name: j.record.Name}}
	if err := r.Patch(ctx, inc, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		// The record counted a later failure, or was pruned: nothing to do.
		logf.FromContext(ctx).V(1).Info("the log of an incident not written", "podIncident", klog.KObj(inc), "error", err.Error())
		return
	}
	r.written.logWritten(j.pod, j.record.Name)
	logWrittenSeconds.Observe(r.Now().Sub(j.lastTime.Time).Seconds())
}

// readJobLogs reads j's logs within logsTimeout, unless j's node did not
// answer a read of j's namespace lately.
func (r *IncidentReconciler) readJobLogs(ctx context.Context, j logJob) logsRead {
	if until, paused := r.unanswered.paused(j.node, j.pod.Namespace, r.Now()); paused {
		return logsRead{note: pausedNote(j.node, until)}
	}
	var (
		got logsRead
		wg  sync.WaitGroup
	)
	if j.collector != "" && j.slot >= 0 {
		// Its own, longer, bound: the collector lists the files a second
		// or two after the failure.
		wg.Go(func() {
			a := r.readArtifacts(ctx, j)
			got.artifacts = &a
		})
	}
	ctx, cancel := context.WithTimeout(ctx, logsTimeout)
	defer cancel()
	// Only what the kubelet (or the apiserver) answered tells whether the
	// node answers.
	logs := func(ctx context.Context, ns, pod, container string, previous bool, limit int) (string, bool, error) {
		out, truncated, err := r.Logs(ctx, ns, pod, container, previous, limit)
		r.unanswered.observe(j.node, j.pod.Namespace, err, r.Now())
		switch {
		case err == nil && kubeletLogGone.MatchString(out):
			return "", false, fmt.Errorf("not read: the kubelet has removed the container's log (%s)", strings.TrimSpace(cut(out, 512)))
		case err != nil && kubeletTerminated.MatchString(err.Error()):
			return "", false, fmt.Errorf("not read: the kubelet has removed the container's log (%s)", cut(err.Error(), 512))
		}
		return out, truncated, err
	}
	if j.debugger != "" {
		wg.Go(func() {
			out, truncated, err := logs(ctx, j.pod.Namespace, j.pod.Name, j.debugger, false, j.limit)
			if err != nil {
				out, truncated = "(log not readable: "+cut(err.Error(), 256)+")", false
			}
			out, _ = j.scrub.tail(out, truncated, j.limit)
			got.debug = &debugv1beta1.IncidentDebugContainer{Name: j.debugger, LogTail: out}
		})
	}
	var err error
	got.tail, got.truncated, err = r.failedLog(ctx, j, logs)
	if err != nil {
		got.note = err.Error()
	}
	wg.Wait()
	// What a record keeps has no credential in it: the read redacted (a
	// read cut by its limit loses its first, partial line), then cut back
	// to its bound (a marker can be longer than what it replaced).
	var cutAgain bool
	got.tail, cutAgain = j.scrub.tail(got.tail, got.truncated, j.limit)
	got.truncated = got.truncated || cutAgain
	return got
}

// kubeletLogGone is what the kubelet streams, as if it were the log, for a
// container whose log it has removed already (a pod it evicted, for one),
// in either of the two forms it has been seen to take: the record says so
// in logError, not as the container's output.
var kubeletLogGone = regexp.MustCompile(`\A(?:failed to try resolving symlinks in path "[^"]*": lstat [^\n]*: no such file or directory|unable to retrieve container logs for [^\s]+)\n?\z`)

// kubeletTerminated is the apiserver's answer, as an error, for the log of
// a container the kubelet no longer has (an evicted pod's): a third form of
// the same loss.
var kubeletTerminated = regexp.MustCompile(`container "[^"]*" in pod "[^"]*" is terminated`)

// where a failed instance is in its container's status.
type where int

const (
	instanceGone     where = iota // replaced by a newer failure: its log is no longer kept
	instanceCurrent               // the container's current state: its log is the current one
	instancePrevious              // its last termination: its log is the previous one
)

// failedLog reads the log of j's failed instance, and makes sure it was
// that instance's: the instance is looked up in the pod's status after the
// read (the kubelet may have restarted the container before it, and then
// the current log is the next instance's, or replaced the previous one with
// the next failure). When the instance has moved (current to previous), its
// log is read again as the previous one.
func (r *IncidentReconciler) failedLog(ctx context.Context, j logJob, logs PodLogs) (string, bool, error) {
	if j.instanceID == "" {
		return logs(ctx, j.pod.Namespace, j.pod.Name, j.container, false, j.limit)
	}
	at := instanceCurrent
	if j.previous {
		at = instancePrevious
	}
	for range 3 {
		out, truncated, err := logs(ctx, j.pod.Namespace, j.pod.Name, j.container, at == instancePrevious, j.limit)
		if err != nil {
			return "", false, err
		}
		after, restarts, aerr := r.instanceNow(ctx, j)
		switch {
		case aerr != nil:
			return "", false, fmt.Errorf("not read: the pod could not be read: %w", aerr)
		case after == instanceGone:
			return "", false, fmt.Errorf("not read: the container failed again (restart count %d) before the failed instance's log could be read; the kubelet keeps only the last instance's log", restarts)
		case after == at && at == instanceCurrent && restarts == 0:
			return firstInstanceLog(ctx, j, logs, out, truncated)
		case after == at:
			return out, truncated, nil
		}
		at = after
	}
	return "", false, errors.New("not read: the container kept restarting while its log was read")
}

// firstInstanceLog is the log of a container's first instance, which the
// pod's status still shows as its current state: out, as read, unless the
// kubelet has restarted the container meanwhile. The kubelet restarts a
// first failure at once (its backoff begins with the second), and reports
// the restart to the apiserver about a second later, so the current log
// just read may already be the next instance's. A first instance has no
// previous one: a previous log the kubelet serves is that instance's own,
// read after the restart. (Later instances are restarted after 10 s of
// backoff at least, long after their failure reaches the apiserver.)
func firstInstanceLog(ctx context.Context, j logJob, logs PodLogs, out string, truncated bool) (string, bool, error) {
	prev, prevTruncated, err := logs(ctx, j.pod.Namespace, j.pod.Name, j.container, true, j.limit)
	if err != nil {
		return out, truncated, nil // not restarted: no previous instance yet
	}
	return prev, prevTruncated, nil
}

// instanceNow is where j's failed instance is in the pod's status as the
// apiserver holds it, and the container's restart count.
func (r *IncidentReconciler) instanceNow(ctx context.Context, j logJob) (where, int32, error) {
	pod := &corev1.Pod{}
	if err := r.APIReader.Get(ctx, j.pod, pod); err != nil {
		return instanceGone, 0, err
	}
	if pod.UID != j.podUID {
		return instanceGone, 0, errors.New("the pod was replaced by another of the same name")
	}
	for _, cs := range containerStatuses(pod) {
		if cs.Name != j.container {
			continue
		}
		switch {
		case cs.State.Terminated != nil && cs.State.Terminated.ContainerID == j.instanceID:
			return instanceCurrent, cs.RestartCount, nil
		case cs.LastTerminationState.Terminated != nil && cs.LastTerminationState.Terminated.ContainerID == j.instanceID:
			return instancePrevious, cs.RestartCount, nil
		}
		return instanceGone, cs.RestartCount, nil
	}
	return instanceGone, 0, nil
}

// containerStatuses are the statuses of pod's containers, init containers
// first.
func containerStatuses(pod *corev1.Pod) []corev1.ContainerStatus {
	return append(append([]corev1.ContainerStatus(nil), pod.Status.InitContainerStatuses...), pod.Status.ContainerStatuses...)
}
