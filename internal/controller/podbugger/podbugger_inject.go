package podbugger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/eventnote"
)

// inject adds pb's container to the pods the plan names, unless a safety
// rule blocks pb, and records what happened in o. A pod the apiserver refuses
// (Pod Security, validation) is remembered and retried later with a backoff,
// and its place within maxPods goes to the next pod; a skipped pod is
// reported once. A pod that changed since it was read is retried shortly.
// The error joins the other failures, one per pod, for the rate limiter to
// retry.
func (r *PodBuggerReconciler) inject(ctx context.Context, pb *debugv1beta1.PodBugger, p plan, o *observation) (ctrl.Result, error) {
	defer func() { o.refused = o.memory.refusals() }()
	if len(o.violations) > 0 {
		return ctrl.Result{}, nil
	}
	key := client.ObjectKeyFromObject(pb)
	for _, s := range p.skipped {
		if o.memory.firstSkip(s.pod, s.reason) {
			r.Recorder.Eventf(pb, s.pod, corev1.EventTypeWarning, s.reason, "SkipPod", "Pod %s skipped: %s", s.pod.Name, s.note)
			injections.WithLabelValues(key.Namespace, key.Name, resultSkipped).Inc()
		}
	}
	var (
		result ctrl.Result
		errs   []error
		added  []*corev1.Pod
	)
	queue, spare := p.inject, p.spare
	for waves := 0; len(queue) > 0; waves++ {
		if waves > 0 {
			// The PodBugger was read afresh before the first wave; a
			// change since (suspended, deleted, narrowed) stops the rest.
			changed, err := r.changedSince(ctx, pb)
			if err != nil {
				errs = append(errs, err)
				break
			}
			if changed {
				result.RequeueAfter = supersededDelay
				break
			}
		}
		wave := queue[:min(len(queue), injectParallelism)]
		queue = queue[len(wave):]
		for i, err := range r.addContainers(ctx, pb, wave, debugContainer(pb)) {
			pod := wave[i]
			var skip *skipError
			switch {
			case errors.As(err, &skip):
				// Its claims reach the node: skipped, as planFor skips what
				// a pod's spec shows; its place goes to the next pod.
				if o.memory.firstSkip(pod, skip.reason) {
					r.Recorder.Eventf(pb, pod, corev1.EventTypeWarning, skip.reason, "SkipPod", "Pod %s skipped: %s", pod.Name, skip.note)
					injections.WithLabelValues(key.Namespace, key.Name, resultSkipped).Inc()
				}
			case err == nil:
				o.carriers[pod.UID] = carrier{name: pod.Name, addedAt: r.Now(), state: debugv1beta1.DebuggerUnknown}
				injections.WithLabelValues(key.Namespace, key.Name, resultAdded).Inc()
				logf.FromContext(ctx).Info("added debug container", "pod", klog.KObj(pod), "container", policy.ContainerName(pb.Name))
				added = append(added, pod)
				continue
			case apierrors.IsConflict(err):
				// The pod changed (or its UID did) since it was read: look
				// again once the watch catches up, never on stale data.
				result.RequeueAfter = time.Second
				continue
			case apierrors.IsNotFound(err):
				// The pod is gone; its place goes to the next pod.
			case refused(err):
				o.memory.refuse(pod, err, o.now)
				r.failed(pb, pod, err)
			default:
				r.failed(pb, pod, err)
				errs = append(errs, fmt.Errorf("adding debug container to pod %s: %w", pod.Name, err))
				continue
			}
			if len(spare) > 0 {
				queue, spare = append(queue, spare[0]), spare[1:]
			}
		}
	}
	r.recordInjected(pb, added)
	if o.injectErr = errors.Join(errs...); o.injectErr != nil {
		return ctrl.Result{}, o.injectErr // never a requeue together with an error
	}
	if next := o.memory.nextRetry(o.now); next > 0 && (result.RequeueAfter == 0 || next < result.RequeueAfter) {
		result.RequeueAfter = next
	}
	return result, o.injectErr
}

// failed tells that adding pb's container to pod failed with err.
func (r *PodBuggerReconciler) failed(pb *debugv1beta1.PodBugger, pod *corev1.Pod, err error) {
	injections.WithLabelValues(pb.Namespace, pb.Name, resultFailed).Inc()
	r.Recorder.Eventf(pb, pod, corev1.EventTypeWarning, debugv1beta1.ReasonInjectionFailed, "AddEphemeralContainer",
		"Adding ephemeral container %s to pod %s failed: %v", policy.ContainerName(pb.Name), pod.Name, err)
}

// refused reports whether the apiserver refused a request for good: Pod
// Security or validation. Retrying the same request soon won't help.
func refused(err error) bool {
	return apierrors.IsForbidden(err) || apierrors.IsInvalid(err)
}

// injectParallelism is how many pods a pass adds containers to at once, as
// many parallel clients of `kubectl debug` would. Each wave's failures hand
// their places within maxPods to spare pods in the next wave, so maxPods holds
// however the requests interleave.
const injectParallelism = 64

// addContainers adds c to each of pods at once, unless the volumes its
// claims are bound to reach the node, or it lacks a volume the artifacts
// collector may mount (a *skipError), and returns each one's error, in the
// order of pods. The pods were read from the apiserver: the cache keeps no
// volume of a pod.
func (r *PodBuggerReconciler) addContainers(ctx context.Context, pb *debugv1beta1.PodBugger, pods []*corev1.Pod, c corev1.EphemeralContainer) []error {
	errs := make([]error, len(pods))
	artifacts := policy.ArtifactsOf(pb)
	var wg sync.WaitGroup
	for i, pod := range pods {
		if artifacts != nil {
			if problem := artifactVolumeProblem(pod, artifacts.Volume); problem != "" {
				errs[i] = &skipError{reason: EventArtifactVolumeNotUsable, note: problem}
				continue
			}
		}
		wg.Go(func() {
			if errs[i] = r.claimsReachHost(ctx, pb, pod); errs[i] == nil {
				errs[i] = r.addContainer(ctx, pod, c)
			}
		})
	}
	wg.Wait()
	return errs
}

// skipError is why a pod is left alone once the volumes its claims are
// bound to were read.
type skipError struct{ reason, note string }

func (e *skipError) Error() string { return e.note }

// claimsReachHost reads the claims of pod's volumes and the
// PersistentVolumes they are bound to, past the cache and just before the
// container is added, and returns a *skipError when one is a hostPath or
// local volume the operator does not allow (policy.SkipPod): a pod's spec
// names only the claim, and what it is bound to is not the tenant's to
// show. A claim that cannot be read fails the pod's injection, for a retry:
// nothing is added to a pod whose volumes are unknown.
func (r *PodBuggerReconciler) claimsReachHost(ctx context.Context, pb *debugv1beta1.PodBugger, pod *corev1.Pod) error {
	claims := policy.ClaimedVolumes(pod)
	if len(claims) == 0 || r.Policy.AllowHostAccess {
		return nil
	}
	bound := make(map[string]*corev1.PersistentVolume, len(claims))
	for volume, claim := range claims {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: claim}, pvc); err != nil {
			// %v: a claim not found is not the pod not found.
			return fmt.Errorf("reading claim %s of volume %s: %v", claim, volume, err) //nolint:errorlint // not wrapped: a claim not found must not read as the pod not found
		}
		if pvc.Spec.VolumeName == "" {
			return fmt.Errorf("claim %s of volume %s is bound to no volume yet", claim, volume)
		}
		pv := &corev1.PersistentVolume{}
		if err := r.APIReader.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
			return fmt.Errorf("reading PersistentVolume %s of claim %s: %v", pvc.Spec.VolumeName, claim, err) //nolint:errorlint // not wrapped, as above
		}
		bound[volume] = pv
	}
	if reason, note, skip := r.Policy.SkipPod(pod, pb.Spec.Profile, bound); skip {
		return &skipError{reason: reason, note: note}
	}
	return nil
}

// recordInjected records one Event for the containers a pass added: one per
// pod would be an API write per pod, doubling an injection's cost. Each pod
// keeps its own record: the container in its spec, forever.
func (r *PodBuggerReconciler) recordInjected(pb *debugv1beta1.PodBugger, added []*corev1.Pod) {
	what := fmt.Sprintf("ephemeral container %s (image %s, profile %s)", policy.ContainerName(pb.Name), pb.Spec.Image, pb.Spec.Profile)
	switch len(added) {
	case 0:
	case 1:
		r.Recorder.Eventf(pb, added[0], corev1.EventTypeNormal, EventInjected, "AddEphemeralContainer", "Added %s to pod %s", what, added[0].Name)
	default:
		r.Recorder.Eventf(pb, eventnote.First(added), corev1.EventTypeNormal, EventInjected, "AddEphemeralContainer", "Added %s to %d pods: %s", what, len(added), eventnote.Names(added))
	}
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
