// Package incident is PodBugger's incident recorder: it writes a
// PodIncident for each failure of a pod a PodBugger with a failure trigger
// selects (recorder.go: a reconciler keyed by pod), reads the failed
// instance's log and the artifacts collector's list into the record after
// (logs.go, artifacts.go), with the pod's Events and node (class.go,
// nodes.go), removing credentials first (scrub.go, secretenv.go), and hands
// the notification a record owes to the sinks (notifier.go). The PodBugger
// controller (package podbugger) registers it in its Setup, prunes the
// records and injects the debug container; what both know of a record is
// package record, what both apply of a PodBugger's spec package policy.
package incident

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/record"
	"github.com/deckhand-dev/deckhand/internal/eventnote"
	"github.com/deckhand-dev/deckhand/internal/notify"
	"github.com/deckhand-dev/deckhand/internal/setupoptions"
)

// reportingController is the name the recorder's controller, logs and
// Events go by: the PodBugger controller's (podbugger.ControllerName), of
// which the recorder is a part.
const reportingController = "podbugger"

// Setup registers the incident recorder, its notifier and the writer of
// their Events; podbugger.Setup calls it beside registering the PodBugger
// reconciler.
func Setup(mgr ctrl.Manager, opts setupoptions.Options) error {
	sinks, err := notify.LoadSinks(opts.PodBuggerIncidentSinksFile)
	if err != nil {
		return fmt.Errorf("--podbugger-incident-sinks-file: %w", err)
	}
	cs, err := kubernetes.NewForConfig(mgr.GetConfig())
	if err != nil {
		return fmt.Errorf("PodBugger incidents: a client for pod logs: %w", err)
	}
	// The incident recorder's Events are written uncached (events.go), their
	// notes bounded as every other controller's are.
	writer := newEventWriter(mgr.GetScheme(), cs.EventsV1(), reportingController)
	var secrets client.Reader
	if opts.PodBuggerRedactSecretEnv {
		secrets = mgr.GetAPIReader()
	}
	return errors.Join(
		mgr.Add(writer),
		NewIncidentReconciler(mgr.GetClient(), mgr.GetAPIReader(), eventnote.Recorder(writer), ClientsetLogs(cs),
			opts.PodBuggerIncidentWritesPerMinute, secrets).SetupWithManager(mgr),
		NewIncidentNotifier(mgr.GetClient(), eventnote.Recorder(writer), sinks, notify.NewOutbox()).SetupWithManager(mgr))
}

// Event reasons of the incident recorder.
const (
	// EventIncidentRecorded: a pod failed and a new PodIncident records it.
	EventIncidentRecorded = "IncidentRecorded"
)

// The incident recorder reads the failing pod afresh, its log, its Events
// and its node, and writes PodIncidents; it changes no pod.
// +kubebuilder:rbac:groups=debug.deckhand.dev,resources=podincidents,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=pods/log,verbs=get
// +kubebuilder:rbac:groups="",resources=events,verbs=list
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get
// A record's owner reference to its PodBugger blocks the PodBugger's
// deletion until the record is gone; where owner-reference permissions are
// enforced that takes update on the PodBugger's finalizers.
// +kubebuilder:rbac:groups=debug.deckhand.dev,resources=podbuggers/finalizers,verbs=update

// PodLogs reads the last bytes (at most limit) of a container's log, of its
// previous instance when previous is set; truncated says there was more.
type PodLogs func(ctx context.Context, namespace, pod, container string, previous bool, limit int) (tail string, truncated bool, err error)

// ClientsetLogs reads logs through cs: the last logTailLines lines, of which
// only the last limit bytes are kept as they stream in.
func ClientsetLogs(cs kubernetes.Interface) PodLogs {
	return func(ctx context.Context, namespace, pod, container string, previous bool, limit int) (string, bool, error) {
		stream, err := cs.CoreV1().Pods(namespace).GetLogs(pod, &corev1.PodLogOptions{
			Container: container, Previous: previous, TailLines: ptr.To[int64](logTailLines),
		}).Stream(ctx)
		if err != nil {
			return "", false, err
		}
		defer func() { _ = stream.Close() }()
		// Keep at most 2*limit bytes at once, whatever the lines' length.
		var kept []byte
		buf := make([]byte, 32*1024)
		truncated := false
		for {
			n, err := stream.Read(buf)
			kept = append(kept, buf[:n]...)
			if len(kept) > 2*limit+len(buf) {
				kept, truncated = slices.Clone(kept[len(kept)-limit:]), true
			}
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return "", false, err
			}
		}
		out, cutNow := tail(string(kept), limit)
		return out, truncated || cutNow, nil
	}
}

// logsTimeout bounds the reads of one capture (Events, node) and of one
// record's logs, so that a node that cannot serve logs (a simulated one,
// one gone) holds a log reader only briefly.
const logsTimeout = 3 * time.Second

// IncidentReconciler records, for each PodBugger with a failure trigger, the
// failures of the pods it selects as PodIncidents. It is keyed by pod, so
// that pods failing at once are recorded at once, each as soon as its
// kubelet reports it.
type IncidentReconciler struct {
	client.Client
	// APIReader reads the failing pod afresh (its whole spec and status: the
	// cache keeps little of a pod), its Events and its node.
	APIReader client.Reader
	Recorder  events.EventRecorder
	Now       func() time.Time
	// Logs reads container logs; nil records no logs.
	Logs PodLogs
	// Secrets reads the Secrets a failing pod's environment takes values
	// from, so that its record removes them; nil reads none.
	Secrets client.Reader

	secretReads chan struct{}

	written    *writtenIncidents
	unanswered *unansweredNodes
	logQueue   *logQueue
	writes     *recordWrites
	scrubs     *scrubs
}

// NewIncidentReconciler returns an incident recorder reading through c (the
// cache), apiReader (the apiserver) and logs, each PodBugger writing at most
// writesPerMinute records a minute (policy.DefaultIncidentWritesPerMinute when 0),
// reading the Secrets of failing pods' environments through secrets (nil:
// none).
func NewIncidentReconciler(c client.Client, apiReader client.Reader, recorder events.EventRecorder, logs PodLogs,
	writesPerMinute int, secrets client.Reader) *IncidentReconciler {
	return &IncidentReconciler{Client: c, APIReader: apiReader, Recorder: recorder, Now: time.Now, Logs: logs,
		Secrets: secrets, secretReads: make(chan struct{}, 2),
		written: &writtenIncidents{byPod: map[types.NamespacedName]map[string]*debugv1beta1.PodIncident{},
			last: map[types.NamespacedName]map[string]metav1.Time{}},
		unanswered: &unansweredNodes{until: map[nodeOfNamespace]silence{}},
		logQueue:   newLogQueue(maxQueuedLogReads, maxQueuedLogReadsPerNamespace, logReadersPerNamespace),
		writes:     newRecordWrites(writesPerMinute),
		scrubs:     &scrubs{byUID: map[types.UID]scrubbing{}}}
}

// Reconcile records what failed in the pod for every PodBugger of its
// namespace that selects it and has a failure trigger, and looks again when
// a not-ready pod reaches its PodBugger's notReadyAfter.
func (r *IncidentReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pod := &corev1.Pod{}
	if err := r.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			r.written.forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	pbs := &debugv1beta1.PodBuggerList{}
	if err := r.List(ctx, pbs, client.InNamespace(pod.Namespace)); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing PodBuggers for pod %s: %w", req.NamespacedName, err)
	}
	var (
		result ctrl.Result
		errs   []error
	)
	now := r.Now()
	for i := range pbs.Items {
		pb := &pbs.Items[i]
		if !policy.Records(pb) || !pb.DeletionTimestamp.IsZero() || !selects(pb, pod) {
			continue
		}
		fs, recheck := failuresOf(pod, policy.Triggers(pb), notReadyAfterOf(pb), now)
		if recheck > 0 && (result.RequeueAfter == 0 || recheck < result.RequeueAfter) {
			result.RequeueAfter = recheck
		}
		if len(fs) > 0 {
			wait, err := r.record(ctx, pb, pod, fs)
			if err != nil {
				errs = append(errs, fmt.Errorf("recording incidents of pod %s for PodBugger %s: %w", req.NamespacedName, pb.Name, err))
			}
			if wait > 0 && (result.RequeueAfter == 0 || wait < result.RequeueAfter) {
				result.RequeueAfter = wait
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return ctrl.Result{}, err
	}
	return result, nil
}

func selects(pb *debugv1beta1.PodBugger, pod *corev1.Pod) bool {
	sel, err := metav1.LabelSelectorAsSelector(&pb.Spec.Selector)
	return err == nil && !sel.Empty() && sel.Matches(labels.Set(pod.Labels))
}

// record counts each of fs not counted yet in a record of pb: in the record
// of the same reason and container its backoff window still holds, or in a
// new one. The pod is read afresh once, before the first capture. The
// record is written at once, without the failed instance's log, which a
// log reader fills in afterwards (logs.go). Beyond pb's
// record writes a minute (recordWrites) a failure waits: the returned
// duration says when the pod is to be looked at again.
func (r *IncidentReconciler) record(ctx context.Context, pb *debugv1beta1.PodBugger, pod *corev1.Pod, fs []failure) (time.Duration, error) {
	recs, err := r.recordsOf(ctx, pb, pod)
	if err != nil {
		return 0, err
	}
	var later time.Duration
	var fresh *corev1.Pod
	// readFresh reads the pod afresh, once; false when it is gone or
	// another pod of the same name (whose own events bring it).
	readFresh := func() (bool, error) {
		if fresh != nil {
			return true, nil
		}
		fresh = &corev1.Pod{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(pod), fresh); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return fresh.UID == pod.UID, nil
	}
	maxAge := policy.IncidentLimitsOf(pb).MaxAge
	for _, f := range fs {
		if lost := r.lostLog(f, recs); lost != nil {
			if ok, err := readFresh(); !ok || err != nil {
				return later, err
			}
			r.readAgain(ctx, pb, fresh, refreshed(f, fresh), lost)
			continue
		}
		// A failure older than maxAge (a pod's lastState from long ago,
		// when the PodBugger is new) would be pruned as soon as written.
		if counted(f, recs) || r.written.counted(pod, pb.UID, f) || r.Now().Sub(f.at) >= maxAge {
			continue
		}
		if r.waitsForWrite(pb, pod, &later) {
			continue
		}
		if ok, err := readFresh(); !ok || err != nil {
			return later, err
		}
		f = refreshed(f, fresh)
		c := r.capture(ctx, fresh)
		c.scrub = r.scrubFor(ctx, pb, fresh)
		job, queued := r.planLog(pb, fresh, f, &c)
		inc, err := r.write(ctx, pb, fresh, f, c, recs)
		if queued {
			if inc == nil || err != nil {
				r.logQueue.release(pod.Namespace)
			} else {
				job.record, job.count, job.lastTime, job.slot = client.ObjectKeyFromObject(inc), inc.Spec.Count, inc.Spec.LastTime, slotOf(inc, job.instanceID)
				r.logQueue.submit(job)
			}
		}
		if err != nil {
			return later, err
		}
		if inc == nil {
			continue
		}
		r.written.remember(pod, inc)
		recs = slices.DeleteFunc(recs, func(x debugv1beta1.PodIncident) bool { return x.Name == inc.Name })
		recs = append(recs, *inc)
		record.Count(pb.Namespace, pb.Name, string(f.reason))
		captureSeconds.WithLabelValues(string(f.reason)).Observe(r.Now().Sub(f.at).Seconds())
		logf.FromContext(ctx).Info("recorded incident", "pod", klog.KObj(pod), "container", f.container, "reason", f.reason,
			"podIncident", inc.Name, "count", inc.Spec.Count)
	}
	return later, nil
}

// waitsForWrite reports whether pod's record write for pb waits for its
// slot among pb's record writes (recordWrites), the sooner of that wait and
// *later in *later.
func (r *IncidentReconciler) waitsForWrite(pb *debugv1beta1.PodBugger, pod *corev1.Pod, later *time.Duration) bool {
	wait := r.writes.take(pb.UID, client.ObjectKeyFromObject(pod), r.Now())
	if wait <= 0 {
		return false
	}
	writesDeferred.Inc()
	if *later == 0 || wait < *later {
		*later = wait
	}
	return true
}

// write counts f in its record among recs, or opens a new one; nil when f
// was counted already (a record written before a restart or a lost
// response).
func (r *IncidentReconciler) write(ctx context.Context, pb *debugv1beta1.PodBugger, pod *corev1.Pod, f failure, c capture,
	recs []debugv1beta1.PodIncident) (*debugv1beta1.PodIncident, error) {
	if existing := recordFor(f, recs); existing != nil {
		inc := existing.DeepCopy()
		updateIncident(inc, pod, f, c, policy.IncidentLimitsOf(pb).Instances)
		err := r.patchSpec(ctx, inc, existing)
		if err == nil {
			return inc, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("counting a failure in PodIncident %s: %w", inc.Name, err)
		}
		// Pruned meanwhile (the PodBugger keeps maxRecords, and a cluster
		// failing everywhere turns them over): the failure opens a new
		// record now, not after a retry's backoff.
		r.written.drop(pod, inc.Name)
	}
	inc := newIncident(pb, pod, f, c)
	switch err := r.Create(ctx, inc); {
	case apierrors.IsAlreadyExists(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("creating PodIncident %s: %w", inc.Name, err)
	}
	r.Recorder.Eventf(pb, pod, corev1.EventTypeWarning, EventIncidentRecorded, "RecordIncident",
		"Pod %s%s failed (%s%s): recorded in PodIncident %s", pod.Name, containerNote(f), f.reason, exitNote(f), inc.Name)
	return inc, nil
}

// patchSpec replaces inc's spec with its own if the apiserver's record still
// counts count failures: the log reader writes the log of a record's last
// failure meanwhile (so a resourceVersion would conflict for nothing), and
// the count tells whether the record this one was computed from is the
// latest.
func (r *IncidentReconciler) patchSpec(ctx context.Context, inc, old *debugv1beta1.PodIncident) error {
	ops, err := specOps(inc.Spec, old.Spec)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := r.Patch(ctx, inc, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		return err
	}
	r.markLost(ctx, inc, old)
	return nil
}

// markLost says, in the instance before the one just added, that its log
// will not be read, if it still waits for it: the kubelet keeps one dead
// instance per container. A patch of its own, tested on the instance and on
// its note: a log the reader wrote meanwhile (which the cache may not show
// yet) stays.
func (r *IncidentReconciler) markLost(ctx context.Context, inc, old *debugv1beta1.PodIncident) {
	n := len(old.Spec.Instances)
	if inc.Spec.LastFailure == nil || n == 0 || old.Spec.Instances[n-1].LogError != record.PendingLogNote {
		return
	}
	// Where it is now: the oldest went first past the bound.
	i := n - 1 - (n + 1 - len(inc.Spec.Instances))
	if i < 0 {
		return
	}
	at := fmt.Sprintf("/spec/instances/%d", i)
	patch, err := json.Marshal([]patchOp{{opTest, at + "/containerID", old.Spec.Instances[n-1].ContainerID},
		{opTest, at + "/logError", record.PendingLogNote}, {opAdd, at + "/logError", lostLogNote}})
	if err != nil {
		return
	}
	target := &debugv1beta1.PodIncident{ObjectMeta: metav1.ObjectMeta{Namespace: inc.Namespace, Name: inc.Name}}
	if err := r.Patch(ctx, target, client.RawPatch(types.JSONPatchType, patch)); err != nil {
		logf.FromContext(ctx).V(1).Info("an instance's lost log not noted", "podIncident", klog.KObj(target), "error", err.Error())
	}
}

// specOps is the JSON patch that makes a record whose spec is old (as the
// cache holds it: counts, times and the instances' shapes, not their logs)
// hold spec, if the apiserver's still counts what old counts: every field
// replaced but the instances, whose logs the cache does not hold; of
// those, the new one added and the oldest removed past the bound (markLost
// notes the previous one's lost log apart).
func specOps(spec, old debugv1beta1.PodIncidentSpec) ([]patchOp, error) {
	fields, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(fields, &m); err != nil {
		return nil, err
	}
	ops := []patchOp{{opTest, pathCount, old.Count}}
	for _, name := range specFields {
		if name == "instances" {
			continue
		}
		var v any
		if raw, ok := m[name]; ok {
			v = raw
		}
		// A null removes an optional field the new spec leaves out.
		ops = append(ops, patchOp{opAdd, "/spec/" + name, v})
	}
	// updateIncident adds an instance for a failure with one
	// (lastFailure), and only then.
	n := len(old.Instances)
	if spec.LastFailure == nil || len(spec.Instances) == 0 {
		return ops, nil
	}
	latest := spec.Instances[len(spec.Instances)-1]
	if n == 0 {
		return append(ops, patchOp{opAdd, "/spec/instances", []debugv1beta1.IncidentInstance{latest}}), nil
	}
	ops = append(ops, patchOp{opAdd, "/spec/instances/-", latest})
	for range n + 1 - len(spec.Instances) {
		ops = append(ops, patchOp{opRemove, "/spec/instances/0", nil})
	}
	return ops, nil
}

// specFields are the JSON names of PodIncidentSpec's fields.
var specFields = func() []string {
	t := reflect.TypeFor[debugv1beta1.PodIncidentSpec]()
	out := make([]string, 0, t.NumField())
	for f := range t.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		out = append(out, name)
	}
	return out
}()

// lostLog is the record among recs that counts f as its last failure and
// still waits for a log no reader of this process will write: one a manager
// queued and stopped before writing (a restart, a lost lease). Nil when
// there is none.
func (r *IncidentReconciler) lostLog(f failure, recs []debugv1beta1.PodIncident) *debugv1beta1.PodIncident {
	at := metav1.NewTime(f.at).Rfc3339Copy()
	for i := range recs {
		rec := &recs[i]
		if rec.Spec.LogError == record.PendingLogNote && familyOf(rec) == f.family() && rec.Spec.LastTime.Equal(&at) &&
			!r.logQueue.reading(client.ObjectKeyFromObject(rec)) {
			return rec
		}
	}
	return nil
}

// readAgain queues the log read of rec, a record whose log was lost, for f,
// its last failure, unless the node did not answer lately or too many reads
// wait: then the next event of the pod tries again.
func (r *IncidentReconciler) readAgain(ctx context.Context, pb *debugv1beta1.PodBugger, pod *corev1.Pod, f failure,
	rec *debugv1beta1.PodIncident) {
	c := capture{scrub: r.scrubFor(ctx, pb, pod)}
	job, queued := r.planLog(pb, pod, f, &c)
	if !queued {
		return
	}
	job.record, job.count, job.lastTime, job.slot = client.ObjectKeyFromObject(rec), rec.Spec.Count, rec.Spec.LastTime, slotOf(rec, job.instanceID)
	r.logQueue.submit(job)
}

// planLog is the log read f's record waits for, queued (a slot reserved)
// unless the node did not answer lately or too many reads wait: then c says
// why the record has no log. The debug container's output is read with it.
func (r *IncidentReconciler) planLog(pb *debugv1beta1.PodBugger, pod *corev1.Pod, f failure, c *capture) (logJob, bool) {
	limit := policy.IncidentLimitsOf(pb).LogTailBytes
	if r.Logs == nil || limit == 0 {
		return logJob{}, false
	}
	node := pod.Spec.NodeName
	if until, paused := r.unanswered.paused(node, pod.Namespace, r.Now()); paused {
		c.logError = pausedNote(node, until)
		return logJob{}, false
	}
	switch r.logQueue.reserve(pod.Namespace) {
	case refusedNamespace:
		dropped.WithLabelValues(droppedLog).Inc()
		c.logError = fmt.Sprintf("not read: %d log reads of this namespace were waiting for their kubelets", maxQueuedLogReadsPerNamespace)
		return logJob{}, false
	case refusedTotal:
		dropped.WithLabelValues(droppedLog).Inc()
		c.logError = fmt.Sprintf("not read: %d log reads were waiting for their kubelets", maxQueuedLogReads)
		return logJob{}, false
	}
	c.logError = record.PendingLogNote
	j := logJob{pod: client.ObjectKeyFromObject(pod), podUID: pod.UID, node: node, container: f.container, limit: limit, slot: -1,
		scrub: c.scrub}
	if j.container == "" && len(pod.Spec.Containers) > 0 {
		j.container = pod.Spec.Containers[0].Name
	}
	if f.instance != nil {
		j.instanceID, j.previous = f.instance.ContainerID, f.previous
	}
	if name := policy.ContainerName(pb.Name); debuggerStarted(pod, name) {
		j.debugger = name
	}
	// The collector may not have started yet (a pod that gets it at its
	// first failure): its log is read again until it has scanned.
	if f.instance != nil && policy.ArtifactsOf(pb).Collects(f.container) {
		j.collector, j.started, j.finished = policy.ContainerName(pb.Name), f.instance.StartedAt, f.instance.FinishedAt
	}
	return j, true
}

func containerNote(f failure) string {
	if f.container == "" {
		return ""
	}
	return " container " + f.container
}

func exitNote(f failure) string {
	if f.instance == nil {
		return ""
	}
	return fmt.Sprintf(", exit code %d", f.instance.ExitCode)
}

// refreshed is f with the instance as the fresh pod reports it (the cache
// keeps no termination message).
func refreshed(f failure, fresh *corev1.Pod) failure {
	if f.instance == nil {
		return f
	}
	for _, cs := range containerStatuses(fresh) {
		if cs.Name != f.container {
			continue
		}
		for _, t := range []*corev1.ContainerStateTerminated{cs.State.Terminated, cs.LastTerminationState.Terminated} {
			if t != nil && t.ContainerID == f.instance.ContainerID && t.FinishedAt.Equal(&f.instance.FinishedAt) {
				f.instance = t
			}
		}
	}
	return f
}

// recordsOf is pb's records of pod: those the cache holds, and those this
// manager wrote that it may not show yet (or shows older).
func (r *IncidentReconciler) recordsOf(ctx context.Context, pb *debugv1beta1.PodBugger, pod *corev1.Pod) ([]debugv1beta1.PodIncident, error) {
	list := &debugv1beta1.PodIncidentList{}
	if err := r.List(ctx, list, client.InNamespace(pod.Namespace), client.MatchingLabels{
		debugv1beta1.IncidentPodBuggerUIDLabel: string(pb.UID), debugv1beta1.IncidentPodUIDLabel: string(pod.UID)}); err != nil {
		return nil, fmt.Errorf("listing PodIncidents: %w", err)
	}
	return r.written.merge(pod, pb.UID, list.Items), nil
}

// capture reads, at once, what a record holds besides the pod and its
// logs: the pod's Events and its node. It never fails: what cannot be read
// is noted or left out.
func (r *IncidentReconciler) capture(ctx context.Context, pod *corev1.Pod) capture {
	ctx, cancel := context.WithTimeout(ctx, logsTimeout)
	defer cancel()
	var (
		c  capture
		wg sync.WaitGroup
	)
	wg.Go(func() {
		list := &corev1.EventList{}
		if err := r.APIReader.List(ctx, list, client.InNamespace(pod.Namespace),
			client.MatchingFields{"involvedObject.uid": string(pod.UID)}); err == nil {
			c.events = list.Items
		}
	})
	if pod.Spec.NodeName != "" {
		wg.Go(func() {
			node := &corev1.Node{}
			if err := r.APIReader.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
				c.node = &debugv1beta1.IncidentNode{Name: pod.Spec.NodeName, Error: cut(err.Error(), debugv1beta1.MaxIncidentMessage)}
				return
			}
			c.node = nodePressure(node)
		})
	}
	wg.Wait()
	return c
}

// debuggerStarted reports whether pod carries the ephemeral container name
// and its kubelet has started it (its log is there).
func debuggerStarted(pod *corev1.Pod, name string) bool {
	for _, s := range pod.Status.EphemeralContainerStatuses {
		if s.Name == name && (s.State.Running != nil || s.State.Terminated != nil) {
			return true
		}
	}
	return false
}

// SetupWithManager watches pods (the failures) and PodBuggers (a new or
// changed one looks at the pods of its namespace).
func (r *IncidentReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(manager.RunnableFunc(r.readLogs)); err != nil {
		return fmt.Errorf("adding the incident log readers: %w", err)
	}
	if err := mgr.Add(manager.RunnableFunc(r.pruneWrittenEvery)); err != nil {
		return fmt.Errorf("adding the pass that forgets written records: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(reportingController+"-incidents").
		For(&corev1.Pod{}, builder.WithPredicates(podFailureChanged)).
		Watches(&debugv1beta1.PodBugger{}, handler.EnqueueRequestsFromMapFunc(r.podsOf),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&debugv1beta1.PodIncident{}, r.forgetDeleted()).
		WithOptions(controller.Options{MaxConcurrentReconciles: incidentParallelism}).
		Complete(r)
}

// incidentParallelism is how many pods' failures are recorded at once.
const incidentParallelism = 8

// podsOf maps a PodBugger with a failure trigger to the pods it selects.
func (r *IncidentReconciler) podsOf(ctx context.Context, obj client.Object) []reconcile.Request {
	pb, ok := obj.(*debugv1beta1.PodBugger)
	if !ok || !policy.Records(pb) {
		return nil
	}
	sel, err := metav1.LabelSelectorAsSelector(&pb.Spec.Selector)
	if err != nil || sel.Empty() {
		return nil
	}
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(pb.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		logf.FromContext(ctx).Error(err, "listing pods", "podbugger", klog.KObj(pb))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(pods.Items))
	for i := range pods.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&pods.Items[i])})
	}
	return reqs
}

// podFailureChanged passes the pod events that may show a failure: a
// container's (or an init container's) state, restart count or last termination, the pod's phase,
// reason, Ready and DisruptionTarget conditions.
var podFailureChanged = predicate.Funcs{
	DeleteFunc: func(event.DeleteEvent) bool { return true },
	UpdateFunc: func(e event.UpdateEvent) bool {
		oldPod, okOld := e.ObjectOld.(*corev1.Pod)
		newPod, okNew := e.ObjectNew.(*corev1.Pod)
		return !okOld || !okNew || failureDigest(oldPod) != failureDigest(newPod)
	},
}

// failureDigest is what of a pod's status failuresOf reads, as a string.
func failureDigest(p *corev1.Pod) string {
	d := fmt.Sprint(p.Status.Phase, p.Status.Reason, p.DeletionTimestamp != nil)
	for _, cs := range containerStatuses(p) {
		d += fmt.Sprint("|", cs.Name, cs.RestartCount, cs.Ready, cs.State.Waiting != nil && cs.State.Waiting.Reason == "CrashLoopBackOff")
		if t := cs.State.Terminated; t != nil {
			d += "|t" + t.ContainerID + t.FinishedAt.String()
		}
		if t := cs.LastTerminationState.Terminated; t != nil {
			d += "|l" + t.ContainerID + t.FinishedAt.String()
		}
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady || c.Type == corev1.DisruptionTarget {
			d += fmt.Sprint("|", c.Type, c.Status, c.Reason)
		}
	}
	return d
}

// writtenIncidents are the records this manager wrote, by pod, until the
// cache shows them (merge) or the pod goes: the cache may not show a record
// written a moment ago, and a failure must not open a second record for want
// of seeing the first. And, until the pod goes, the last failure counted of
// each of its families, by PodBugger: a failure counted in a record pruned
// since (maxRecords turns records over while pods keep failing) is not
// recorded again at the pod's next event.
type writtenIncidents struct {
	mu    sync.Mutex
	byPod map[types.NamespacedName]map[string]*debugv1beta1.PodIncident
	// last is, by pod, the time of the last failure counted for a
	// PodBugger's UID and a family ("<uid>/<family>").
	last map[types.NamespacedName]map[string]metav1.Time
}

// counted reports whether f of pod was counted for the PodBugger pbUID in
// a record this manager wrote: its family's last failure counted is not
// older than f.
func (w *writtenIncidents) counted(pod *corev1.Pod, pbUID types.UID, f failure) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.last[client.ObjectKeyFromObject(pod)][string(pbUID)+"/"+f.family()]
	at := metav1.NewTime(f.at).Rfc3339Copy()
	return ok && !last.Before(&at)
}

// remember keeps a slim copy of inc (as the cache holds it), and only the
// latest record of each reason and container of the pod: an older one can
// neither take a count (recordFor) nor be needed to tell a failure counted
// (counted compares with the latest), so a pod failing for days keeps a
// few entries, not one per backoff window.
func (w *writtenIncidents) remember(pod *corev1.Pod, inc *debugv1beta1.PodIncident) {
	w.mu.Lock()
	defer w.mu.Unlock()
	key := client.ObjectKeyFromObject(pod)
	if w.byPod[key] == nil {
		w.byPod[key] = map[string]*debugv1beta1.PodIncident{}
	}
	for name, old := range w.byPod[key] {
		if old.Spec.Reason == inc.Spec.Reason && old.Spec.Container == inc.Spec.Container {
			delete(w.byPod[key], name)
		}
	}
	slim := inc.DeepCopy()
	record.Slim(slim)
	w.byPod[key][inc.Name] = slim
	if w.last[key] == nil {
		w.last[key] = map[string]metav1.Time{}
	}
	family := inc.Labels[debugv1beta1.IncidentPodBuggerUIDLabel] + "/" + familyOf(inc)
	if last, ok := w.last[key][family]; !ok || last.Before(&inc.Spec.LastTime) {
		w.last[key][family] = inc.Spec.LastTime
	}
}

// logWritten notes that the log of the record name of pod has been written.
func (w *writtenIncidents) logWritten(pod types.NamespacedName, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if inc := w.byPod[pod][name]; inc != nil {
		inc.Spec.LogError = ""
	}
}

func (w *writtenIncidents) drop(pod *corev1.Pod, name string) {
	w.dropRecord(client.ObjectKeyFromObject(pod), name)
}

// dropRecord forgets the record name of the pod key: it is gone.
func (w *writtenIncidents) dropRecord(key types.NamespacedName, name string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byPod[key], name)
	if len(w.byPod[key]) == 0 {
		delete(w.byPod, key)
	}
}

// forgetDeleted is the handler of PodIncidents' deletions: the recorder
// forgets the copy it kept of a record pruned (or deleted by hand) before
// its cache showed it, which would otherwise stay until the pod's next
// failure tried to count in it. It queues nothing.
func (r *IncidentReconciler) forgetDeleted() handler.Funcs {
	return handler.Funcs{
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, _ workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if inc, ok := e.Object.(*debugv1beta1.PodIncident); ok && inc.Spec.Pod.Name != "" {
				r.written.dropRecord(types.NamespacedName{Namespace: inc.Namespace, Name: inc.Spec.Pod.Name}, inc.Name)
			}
		},
	}
}

func (w *writtenIncidents) forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.byPod, key)
	delete(w.last, key)
}

// pods lists the pods w keeps something for.
func (w *writtenIncidents) pods() []types.NamespacedName {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]types.NamespacedName, 0, len(w.last)+len(w.byPod))
	for key := range w.last {
		out = append(out, key)
	}
	for key := range w.byPod {
		if _, ok := w.last[key]; !ok {
			out = append(out, key)
		}
	}
	return out
}

// keepOnly forgets what w keeps for the pod key but of the pod podUID and
// the PodBuggers recording.
func (w *writtenIncidents) keepOnly(key types.NamespacedName, podUID types.UID, recording map[types.UID]bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for name, inc := range w.byPod[key] {
		if inc.Labels[debugv1beta1.IncidentPodUIDLabel] != string(podUID) || !recording[types.UID(inc.Labels[debugv1beta1.IncidentPodBuggerUIDLabel])] {
			delete(w.byPod[key], name)
		}
	}
	if len(w.byPod[key]) == 0 {
		delete(w.byPod, key)
	}
	for family := range w.last[key] {
		if uid, _, _ := strings.Cut(family, "/"); !recording[types.UID(uid)] {
			delete(w.last[key], family)
		}
	}
	if len(w.last[key]) == 0 {
		delete(w.last, key)
	}
}

// writtenPruneInterval is how often the recorder forgets what it keeps for
// pods and PodBuggers that are gone (pruneWritten).
const writtenPruneInterval = 5 * time.Minute

// pruneWrittenEvery runs pruneWritten every writtenPruneInterval until ctx
// ends: a manager Runnable.
func (r *IncidentReconciler) pruneWrittenEvery(ctx context.Context) error {
	tick := time.NewTicker(writtenPruneInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
			r.writes.forget(r.Now())
			if err := r.pruneWritten(ctx); err != nil {
				logf.FromContext(ctx).Error(err, "forgetting the records of pods that are gone")
			}
		}
	}
}

// pruneWritten forgets what the recorder keeps (writtenIncidents) for pods
// that are gone, or were replaced under their name, and for PodBuggers that
// are gone or record no more. The deletions that free it otherwise (a pod's
// reconcile finding it gone, a record's delete event) are not always
// delivered: a namespace the cache stops holding, when its last PodBugger
// goes, tells of no deletion. So what is kept is bounded by what exists,
// checked against the cache: each namespace's PodBuggers, then the pods of
// the namespaces where one records (which the cache holds, for them).
func (r *IncidentReconciler) pruneWritten(ctx context.Context) error {
	recording := map[string]map[types.UID]bool{}
	var errs []error
	for _, key := range r.written.pods() {
		rec, ok := recording[key.Namespace]
		if !ok {
			pbs := &debugv1beta1.PodBuggerList{}
			if err := r.List(ctx, pbs, client.InNamespace(key.Namespace)); err != nil {
				errs = append(errs, fmt.Errorf("listing the PodBuggers of namespace %s: %w", key.Namespace, err))
				continue
			}
			rec = map[types.UID]bool{}
			for i := range pbs.Items {
				if pb := &pbs.Items[i]; policy.Records(pb) && pb.DeletionTimestamp.IsZero() {
					rec[pb.UID] = true
				}
			}
			recording[key.Namespace] = rec
		}
		if len(rec) == 0 {
			r.written.forget(key)
			continue
		}
		pod := &corev1.Pod{}
		switch err := r.Get(ctx, key, pod); {
		case apierrors.IsNotFound(err):
			r.written.forget(key)
		case err != nil:
			errs = append(errs, fmt.Errorf("reading pod %s: %w", key, err))
		default:
			r.written.keepOnly(key, pod.UID, rec)
		}
	}
	return errors.Join(errs...)
}

// merge is cached with what was written for pod by the PodBugger pbUID in
// place of an older copy (fewer counts) or a missing one. A record the
// cache shows counting as many failures as were written is forgotten: the
// cache tells of it from then on (and of its pruning, which a copy kept
// here would hide until a write to it failed), so what is kept is only
// what the cache has not shown yet, not a copy of every failing pod's
// latest record for as long as the pod lives.
func (w *writtenIncidents) merge(pod *corev1.Pod, pbUID types.UID, cached []debugv1beta1.PodIncident) []debugv1beta1.PodIncident {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := slices.Clone(cached)
	key := client.ObjectKeyFromObject(pod)
	for name, inc := range w.byPod[key] {
		if inc.Labels[debugv1beta1.IncidentPodUIDLabel] != string(pod.UID) || inc.Labels[debugv1beta1.IncidentPodBuggerUIDLabel] != string(pbUID) {
			continue
		}
		i := slices.IndexFunc(out, func(x debugv1beta1.PodIncident) bool { return x.Name == name })
		switch {
		case i < 0:
			out = append(out, *inc.DeepCopy())
		case out[i].Spec.Count < inc.Spec.Count:
			out[i] = *inc.DeepCopy()
		default:
			delete(w.byPod[key], name)
		}
	}
	if len(w.byPod[key]) == 0 {
		delete(w.byPod, key)
	}
	return out
}
