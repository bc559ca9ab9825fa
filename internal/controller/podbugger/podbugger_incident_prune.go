package podbugger

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// pruneIncidents deletes pb's PodIncidents beyond incidents.maxRecords (the
// oldest last failures first) and those whose last failure is older than
// incidents.maxAge. It returns the pods the kept records name (failing) and
// how soon the next one expires. Before deleting, pb is read past the cache:
// a deletion cannot be undone, and a stale spec (a lower maxRecords since
// raised) must not decide it.
//
// The records are read from the cache without copying them (up to 200,
// on every pass; nothing here changes them): with copies, listing and
// sorting them was a sixth of the manager's CPU while 1,000 pods
// crash-looped (docs/dev-log/performance.md).
func (r *PodBuggerReconciler) pruneIncidents(ctx context.Context, pb *debugv1beta1.PodBugger) (failing map[types.UID]bool, expiry time.Duration, err error) {
	list := &debugv1beta1.PodIncidentList{}
	if err := r.List(ctx, list, client.InNamespace(pb.Namespace), client.MatchingLabels{debugv1beta1.IncidentPodBuggerUIDLabel: string(pb.UID)},
		client.UnsafeDisableDeepCopy); err != nil {
		return nil, 0, fmt.Errorf("listing PodIncidents of PodBugger %s: %w", client.ObjectKeyFromObject(pb), err)
	}
	now := r.Now()
	keep, drop := prunePlan(list.Items, limitsOf(pb), now)
	if len(drop) > 0 {
		if changed, err := r.changedSince(ctx, pb); err != nil || changed {
			return nil, supersededDelay, err
		}
	}
	if err := r.deleteIncidents(ctx, pb, drop); err != nil {
		return nil, 0, err
	}
	failing = make(map[types.UID]bool, len(keep))
	maxAge := limitsOf(pb).maxAge
	for _, inc := range keep {
		failing[types.UID(inc.Spec.Pod.UID)] = true
		if d := inc.Spec.LastTime.Add(maxAge).Sub(now) + time.Second; expiry == 0 || d < expiry {
			expiry = d
		}
	}
	return failing, expiry, nil
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

// prunePlan splits records into those kept (at most l.maxRecords, the
// latest last failures first, none older than l.maxAge at now) and those to
// delete, as pointers into records (which it neither changes nor copies).
// It is pure.
func prunePlan(records []debugv1beta1.PodIncident, l incidentLimits, now time.Time) (keep, drop []*debugv1beta1.PodIncident) {
	sorted := make([]*debugv1beta1.PodIncident, len(records))
	for i := range records {
		sorted[i] = &records[i]
	}
	slices.SortFunc(sorted, func(a, b *debugv1beta1.PodIncident) int {
		return cmp.Or(b.Spec.LastTime.Compare(a.Spec.LastTime.Time), b.CreationTimestamp.Compare(a.CreationTimestamp.Time), cmp.Compare(a.Name, b.Name))
	})
	for _, inc := range sorted {
		if len(keep) < l.maxRecords && now.Sub(inc.Spec.LastTime.Time) < l.maxAge {
			keep = append(keep, inc)
		} else {
			drop = append(drop, inc)
		}
	}
	return keep, drop
}
