package podbugger

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/record"
)

// pruneIncidents deletes pb's PodIncidents beyond incidents.maxRecords (the
// oldest last failures first) and those whose last failure is older than
// incidents.maxAge. It returns the records it kept (the cache's, not to be
// changed) and how soon the next one expires. Before deleting, pb is read past the cache:
// a deletion cannot be undone, and a stale spec (a lower maxRecords since
// raised) must not decide it.
//
// The records are read from the cache without copying them (up to 200,
// on every pass; nothing here changes them): with copies, listing and
// sorting them was a sixth of the manager's CPU while 1,000 pods
// crash-looped (docs/dev-log/performance.md).
func (r *PodBuggerReconciler) pruneIncidents(ctx context.Context, pb *debugv1beta1.PodBugger) (kept []*debugv1beta1.PodIncident, expiry time.Duration, err error) {
	list := &debugv1beta1.PodIncidentList{}
	if err := r.List(ctx, list, client.InNamespace(pb.Namespace), client.MatchingLabels{debugv1beta1.IncidentPodBuggerUIDLabel: string(pb.UID)},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, 0, fmt.Errorf("listing PodIncidents of PodBugger %s: %w", client.ObjectKeyFromObject(pb), err)
	}
	now := r.Now()
	keep, drop := prunePlan(list.Items, policy.IncidentLimitsOf(pb), now)
	if len(drop) > 0 {
		if changed, err := r.changedSince(ctx, pb); err != nil || changed {
			return nil, supersededDelay, err
		}
	}
	if err := r.deleteIncidents(ctx, pb, drop); err != nil {
		return nil, 0, err
	}
	maxAge := policy.IncidentLimitsOf(pb).MaxAge
	for _, inc := range keep {
		if d := inc.Spec.LastTime.Add(maxAge).Sub(now) + time.Second; expiry == 0 || d < expiry {
			expiry = d
		}
	}
	return keep, expiry, nil
}

// failingPods are the pods records name, by UID.
func failingPods(records []*debugv1beta1.PodIncident) map[types.UID]bool {
	failing := make(map[types.UID]bool, len(records))
	for _, inc := range records {
		failing[types.UID(inc.Spec.Pod.UID)] = true
	}
	return failing
}

// dropLogsOfGonePods removes, from pb's records whose pod is gone, the
// failed instance's log tail and the debug container's output, and says so
// in logError, unless pb keeps logs (incidents.keepLogsAfterPodDeletion):
// a tenant's log lives as long as its pod, not up to 30 days after it.
// pods are the namespace's pods as the pass read them. A pod missing there
// is read past the cache before its records lose their logs, and pb with
// it: the loss cannot be undone, and neither a cache that has not seen the
// pod yet nor a spec that keeps logs since must decide it.
//
// A log written into a record after this (the log reader's patch) tests
// that the record still waits for it, which a dropped one does not: it
// never brings the log back.
func (r *PodBuggerReconciler) dropLogsOfGonePods(ctx context.Context, pb *debugv1beta1.PodBugger, records []*debugv1beta1.PodIncident, pods []corev1.Pod) error {
	if policy.IncidentLimitsOf(pb).KeepLogs {
		return nil
	}
	// The pods of the records that still hold their logs (at most
	// maxRecords), less those the pass read: not the namespace's pods, which
	// can be thousands.
	missing := map[types.UID]bool{}
	for _, inc := range records {
		if inc.Spec.LogError != record.GoneLogNote {
			missing[types.UID(inc.Spec.Pod.UID)] = true
		}
	}
	for i := 0; i < len(pods) && len(missing) > 0; i++ {
		delete(missing, pods[i].UID)
	}
	if len(missing) == 0 {
		return nil
	}
	var gone []*debugv1beta1.PodIncident
	for _, inc := range records {
		if inc.Spec.LogError != record.GoneLogNote && missing[types.UID(inc.Spec.Pod.UID)] {
			gone = append(gone, inc)
		}
	}
	if changed, err := r.changedSince(ctx, pb); err != nil || changed {
		// Changed: its event brings the next pass, which judges with it.
		return err
	}
	var readErrs []error
	podGone := map[types.UID]bool{}
	gone = slices.DeleteFunc(gone, func(inc *debugv1beta1.PodIncident) bool {
		uid := types.UID(inc.Spec.Pod.UID)
		if _, read := podGone[uid]; !read {
			key := types.NamespacedName{Namespace: inc.Namespace, Name: inc.Spec.Pod.Name}
			pod := &metav1.PartialObjectMetadata{}
			pod.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Pod"))
			switch err := r.APIReader.Get(ctx, key, pod); {
			case apierrors.IsNotFound(err):
				podGone[uid] = true
			case err != nil:
				// Kept for now: the retry reads it again.
				podGone[uid] = false
				readErrs = append(readErrs, fmt.Errorf("reading pod %s past the cache: %w", key, err))
			default:
				podGone[uid] = pod.UID != uid
			}
		}
		return !podGone[uid]
	})
	errs := make([]error, len(gone), len(gone)+len(readErrs))
	sem := make(chan struct{}, pruneParallelism)
	var wg sync.WaitGroup
	for i, inc := range gone {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = r.dropLogs(ctx, inc)
		})
	}
	wg.Wait()
	return errors.Join(append(errs, readErrs...)...)
}

// dropLogs patches inc (tested by its UID, a record written since under its
// name is not this one, and by its count, so that the instances patched are
// those the cache showed) to hold no log, and says why. Only the logs go:
// the instances' other fields are left as they are.
func (r *PodBuggerReconciler) dropLogs(ctx context.Context, inc *debugv1beta1.PodIncident) error {
	ops := make([]patchOp, 0, 6+3*len(inc.Spec.Instances))
	ops = append(ops, patchOp{opTest, "/metadata/uid", inc.UID}, patchOp{opTest, pathCount, inc.Spec.Count},
		patchOp{opAdd, "/spec/logTail", ""}, patchOp{opAdd, "/spec/logTruncated", false}, patchOp{opAdd, pathLogError, record.GoneLogNote},
		patchOp{opAdd, "/spec/debugContainer", nil})
	for i := range inc.Spec.Instances {
		at := fmt.Sprintf("/spec/instances/%d", i)
		ops = append(ops, patchOp{opAdd, at + "/logTail", ""}, patchOp{opAdd, at + "/logTruncated", false},
			patchOp{opAdd, at + "/logError", record.GoneLogNote})
	}
	patch, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	target := &debugv1beta1.PodIncident{ObjectMeta: metav1.ObjectMeta{Namespace: inc.Namespace, Name: inc.Name}}
	if err := r.Patch(ctx, target, client.RawPatch(types.JSONPatchType, patch)); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("dropping the log of PodIncident %s (its pod is gone): %w", client.ObjectKeyFromObject(target), err)
	}
	return nil
}

// pruneParallelism is how many records a pass deletes at once. One at a
// time, a pass fell behind pods failing together: 1,000 crash-looping pods
// open 33 records a second, and on a busy apiserver a deletion takes longer
// than 30 ms (the crash loop bench kept 871 records of 200). Four keep up
// with deletions of up to 120 ms without bunching a pass's deletions ahead
// of the recorder's own requests.
const pruneParallelism = 4

// deleteIncidents deletes the records of pb in drop, pruneParallelism at a
// time, each by its UID (a record of the same name written since is not
// this one); one already gone is no error.
func (r *PodBuggerReconciler) deleteIncidents(ctx context.Context, pb *debugv1beta1.PodBugger, drop []*debugv1beta1.PodIncident) error {
	errs := make([]error, len(drop))
	sem := make(chan struct{}, pruneParallelism)
	var wg sync.WaitGroup
	for i, inc := range drop {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			// A copy of the name and UID only: the cache's record is
			// not the client's to fill in.
			gone := &debugv1beta1.PodIncident{ObjectMeta: metav1.ObjectMeta{Namespace: inc.Namespace, Name: inc.Name}}
			if err := r.Delete(ctx, gone, client.Preconditions{UID: &inc.UID}); err != nil && !apierrors.IsNotFound(err) {
				errs[i] = fmt.Errorf("deleting PodIncident %s of PodBugger %s: %w", inc.Name, client.ObjectKeyFromObject(pb), err)
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// prunePlan splits records into those kept (at most l.MaxRecords, the
// latest last failures first, none older than l.MaxAge at now) and those to
// delete, as pointers into records (which it neither changes nor copies).
// It is pure.
func prunePlan(records []debugv1beta1.PodIncident, l policy.IncidentLimits, now time.Time) (keep, drop []*debugv1beta1.PodIncident) {
	sorted := make([]*debugv1beta1.PodIncident, len(records))
	for i := range records {
		sorted[i] = &records[i]
	}
	slices.SortFunc(sorted, func(a, b *debugv1beta1.PodIncident) int {
		return cmp.Or(b.Spec.LastTime.Compare(a.Spec.LastTime.Time), b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	for _, inc := range sorted {
		if len(keep) < l.MaxRecords && now.Sub(inc.Spec.LastTime.Time) < l.MaxAge {
			keep = append(keep, inc)
		} else {
			drop = append(drop, inc)
		}
	}
	return keep, drop
}

// patchOp is one operation of a JSON patch (RFC 6902). The recorder
// (package incident) patches records with its own: an operation's three
// fields are not worth a package both import, nor, written unkeyed as
// both write them, an exported type vet would have them key.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value"`
}

const (
	opTest = "test"
	opAdd  = "add"

	// Paths dropLogs tests and writes.
	pathCount    = "/spec/count"
	pathLogError = "/spec/logError"
)
