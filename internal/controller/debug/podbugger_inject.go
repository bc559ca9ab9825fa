package debug

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
)

// inject adds pb's container to the pods the plan names, unless a safety
// rule blocks pb, records them in o.carriers and the failures in
// o.injectErr, and tells about skipped pods with Events. A pod that changed
// since the cache saw it is retried shortly; other failures are returned,
// one per pod.
func (r *PodBuggerReconciler) inject(ctx context.Context, pb *debugv1alpha1.PodBugger, p plan, o *observation) (ctrl.Result, []error) {
	if len(o.violations) > 0 {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(pb)
	for _, s := range p.skipped {
		r.Recorder.Eventf(pb, s.pod, corev1.EventTypeWarning, s.reason, "SkipPod", "Pod %s skipped: %s", s.pod.Name, s.note)
		injections.WithLabelValues(key.Namespace, key.Name, resultSkipped).Inc()
	}
	var result ctrl.Result
	var errs []error
	for _, pod := range p.inject {
		err := r.addContainer(ctx, pod, debugContainer(pb))
		switch {
		case err == nil:
			o.carriers[pod.UID] = carrier{name: pod.Name, addedAt: r.Now()}
			injections.WithLabelValues(key.Namespace, key.Name, resultAdded).Inc()
			log.FromContext(ctx).Info("added debug container", "pod", klog.KObj(pod), "container", ContainerName(pb.Name))
			r.Recorder.Eventf(pb, pod, corev1.EventTypeNormal, ReasonInjected, "AddEphemeralContainer",
				"Added ephemeral container %s (image %s, profile %s) to pod %s", ContainerName(pb.Name), pb.Spec.Image, pb.Spec.Profile, pod.Name)
		case apierrors.IsNotFound(err):
			// The pod is gone; its deletion brings us back if it matters.
		case apierrors.IsConflict(err):
			// The cache is behind the pod (or its UID changed): look again
			// once the watch catches up, never on stale data.
			result.RequeueAfter = time.Second
		default:
			injections.WithLabelValues(key.Namespace, key.Name, resultFailed).Inc()
			r.Recorder.Eventf(pb, pod, corev1.EventTypeWarning, debugv1alpha1.ReasonInjectionFailed, "AddEphemeralContainer",
				"Adding ephemeral container %s to pod %s failed: %v", ContainerName(pb.Name), pod.Name, err)
			errs = append(errs, fmt.Errorf("adding debug container to pod %s: %w", pod.Name, err))
		}
	}
	o.injectErr = errors.Join(errs...)
	return result, errs
}

// refused reports whether the apiserver refused a request for good: Pod
// Security or validation. Retrying the same request soon won't help; a change
// to the pod, the namespace or the PodBugger brings the controller back.
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
}

// addContainer adds c to pod's ephemeral containers through the
// pods/ephemeralcontainers subresource. The update carries the pod's UID and
// resourceVersion, so it fails with a conflict rather than act on a pod that
// changed since it was read; and the apiserver refuses a second container of
// the same name, so a pod can never get it twice.
func (r *PodBuggerReconciler) addContainer(ctx context.Context, pod *corev1.Pod, c corev1.EphemeralContainer) error {
	updated := pod.DeepCopy()
	updated.Spec.EphemeralContainers = append(updated.Spec.EphemeralContainers, c)
	return r.SubResource("ephemeralcontainers").Update(ctx, updated, client.FieldOwner(fieldOwner))
}
