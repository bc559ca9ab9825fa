package podset

import (
	"context"
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
)

// selects reports whether the PodSet's selector (status.selector) matches
// the pod's labels.
func selects(set *appsv1beta1.PodSet, p metav1.Object) bool {
	return p.GetLabels()[appsv1beta1.PodSetLabel] == set.Name
}

// claimPods makes the pods the set controls match its selector, as the
// ReplicaSet controller's ClaimPods does: owned pods whose labels no longer
// match are released (so relabelling a pod takes it out of the set, which
// replaces it), and orphans that match are adopted. It returns the pods the
// set controls afterwards.
func (r *PodSetReconciler) claimPods(ctx context.Context, set *appsv1beta1.PodSet, owned []*corev1.Pod) ([]*corev1.Pod, error) {
	kept := make([]*corev1.Pod, 0, len(owned))
	for _, p := range owned {
		if selects(set, p) {
			kept = append(kept, p)
			continue
		}
		if err := r.patchOwner(ctx, p.DeepCopy(), map[string]any{"$patch": "delete", "uid": set.UID}); err != nil {
			return nil, fmt.Errorf("releasing pod %s: %w", p.Name, err)
		}
	}
	orphans, err := r.orphansOf(ctx, set)
	if err != nil || len(orphans) == 0 {
		return kept, err
	}
	// The cache may show a PodSet that is already being deleted, or one of
	// the same name that is gone: adopting for it would hand the pod to the
	// garbage collector. Read it past the cache first.
	fresh := &appsv1beta1.PodSet{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(set), fresh); err != nil {
		return nil, fmt.Errorf("checking PodSet before adopting pods: %w", client.IgnoreNotFound(err))
	}
	if fresh.UID != set.UID || fresh.DeletionTimestamp != nil {
		return kept, nil
	}
	ref := metav1.NewControllerRef(set, appsv1beta1.GroupVersion.WithKind("PodSet"))
	for _, p := range orphans {
		p = p.DeepCopy() // the cache's own
		if err := r.patchOwner(ctx, p, ref); err != nil {
			return nil, fmt.Errorf("adopting pod %s: %w", p.Name, err)
		}
		kept = append(kept, p)
	}
	return kept, nil
}

// orphansOf lists the pods that match the set's selector and have no
// controller, and are not being deleted. Like podsOf, it returns the cache's
// own pods.
func (r *PodSetReconciler) orphansOf(ctx context.Context, set *appsv1beta1.PodSet) ([]*corev1.Pod, error) {
	list := &corev1.PodList{}
	if err := r.List(ctx, list, client.InNamespace(set.Namespace), client.MatchingFields{podOrphanIndex: set.Name}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("listing pods that match PodSet %s: %w", client.ObjectKeyFromObject(set), err)
	}
	var out []*corev1.Pod
	for i := range list.Items {
		p := &list.Items[i]
		if selects(set, p) && metav1.GetControllerOfNoCopy(p) == nil && p.DeletionTimestamp == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// patchOwner adds (or, with "$patch": "delete", removes) one owner
// reference of the pod with a strategic merge patch, which merges owner
// references by UID. The patch carries the pod's UID, so it fails instead
// of touching another pod that took the same name. On success p is the
// patched pod. A pod gone meanwhile is no error.
func (r *PodSetReconciler) patchOwner(ctx context.Context, p *corev1.Pod, ref any) error {
	body, err := json.Marshal(map[string]any{"metadata": map[string]any{"ownerReferences": []any{ref}, "uid": p.UID}})
	if err != nil {
		return err
	}
	if err := r.Patch(ctx, p, client.RawPatch(types.StrategicMergePatchType, body)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return nil
}
