package incident

import (
	"context"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// What a pod may make the recorder read of its Secrets, per failure: a
// tenant writes the pod, so each is bounded. Values shorter than four bytes
// are never removed (redact.New), longer ones than maxSecretEnvValue are
// left to the detectors (a certificate or key file, which they find by
// shape): matching them exactly costs their length at every offset.
const (
	maxSecretEnvSecrets = 16
	maxSecretEnvValues  = 64
	maxSecretEnvValue   = 4096
)

// Outcomes of reading a Secret a failing pod's environment takes values
// from, the outcome label of secretEnvReads.
const (
	secretEnvRead      = "read"
	secretEnvForbidden = "forbidden"
	secretEnvMissing   = "missing"
	secretEnvFailed    = "failed"
)

// secretEnvRef is a Secret a pod's environment takes values from, and the
// keys it takes (nil for all of them: envFrom).
type secretEnvRef struct {
	name string
	keys []string
}

// secretEnvRefs are the Secrets every container of pod (init, app and
// ephemeral) takes environment values from, by name, at most
// maxSecretEnvSecrets of them, and whether there were more.
func secretEnvRefs(pod *corev1.Pod) ([]secretEnvRef, bool) {
	byName := map[string]*secretEnvRef{}
	add := func(name, key string, all bool) {
		ref := byName[name]
		if ref == nil {
			ref = &secretEnvRef{name: name, keys: []string{}}
			byName[name] = ref
		}
		switch {
		case all:
			ref.keys = nil
		case ref.keys != nil && !slices.Contains(ref.keys, key):
			ref.keys = append(ref.keys, key)
		}
	}
	visit := func(env []corev1.EnvVar, from []corev1.EnvFromSource) {
		for _, e := range env {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name != "" {
				add(e.ValueFrom.SecretKeyRef.Name, e.ValueFrom.SecretKeyRef.Key, false)
			}
		}
		for _, f := range from {
			if f.SecretRef != nil && f.SecretRef.Name != "" {
				add(f.SecretRef.Name, "", true)
			}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.Containers {
		visit(c.Env, c.EnvFrom)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		visit(c.Env, c.EnvFrom)
	}
	refs := make([]secretEnvRef, 0, len(byName))
	for _, ref := range byName {
		refs = append(refs, *ref)
	}
	sort.Slice(refs, func(i, j int) bool { return refs[i].name < refs[j].name })
	if len(refs) > maxSecretEnvSecrets {
		return refs[:maxSecretEnvSecrets], true
	}
	return refs, false
}

// secretEnvValues reads, past the cache, the values a pod's environment
// takes from the Secrets refs of its namespace, for its record to remove
// wherever they appear. It reads only the Secrets the pod names, by name (get: never a list or a watch),
// and keeps only the keys the pod takes. A Secret it may not read (the
// manager is given get on Secrets only when --podbugger-redact-secret-env
// is set), or that is gone, is skipped: the record is then cleaned by the
// detectors and patterns alone.
func secretEnvValues(ctx context.Context, reader client.Reader, namespace string, refs []secretEnvRef) []string {
	var values []string
	keep := func(v string) {
		for _, v := range []string{v, strings.TrimSpace(v)} {
			if len(v) <= maxSecretEnvValue && len(values) < maxSecretEnvValues && !slices.Contains(values, v) {
				values = append(values, v)
			}
		}
	}
	for _, ref := range refs {
		secret := &corev1.Secret{}
		err := reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.name}, secret)
		switch {
		case apierrors.IsForbidden(err):
			// Every other Secret of the namespace is forbidden too.
			secretEnvReads.WithLabelValues(secretEnvForbidden).Inc()
			return values
		case apierrors.IsNotFound(err):
			secretEnvReads.WithLabelValues(secretEnvMissing).Inc()
			continue
		case err != nil:
			secretEnvReads.WithLabelValues(secretEnvFailed).Inc()
			continue
		}
		secretEnvReads.WithLabelValues(secretEnvRead).Inc()
		keys := ref.keys
		if keys == nil {
			for k := range secret.Data {
				keys = append(keys, k)
			}
			sort.Strings(keys)
		}
		for _, k := range keys {
			if v, ok := secret.Data[k]; ok {
				keep(string(v))
			}
		}
	}
	return values
}

// scrubFor is pb's scrub for a record of pod: with the values pod's
// environment takes from Secrets when the recorder reads them (Secrets set).
// At most cap(secretReads) such reads run at once, so that pods naming
// Secrets of a MiB each cost the manager a few MiB at most.
func (r *IncidentReconciler) scrubFor(ctx context.Context, pb *debugv1beta1.PodBugger, pod *corev1.Pod) scrub {
	sc := r.scrubs.of(pb)
	refs, _ := secretEnvRefs(pod)
	if r.Secrets == nil || sc.unusable != "" || len(refs) == 0 {
		return sc
	}
	select {
	case r.secretReads <- struct{}{}:
	case <-ctx.Done():
		return sc
	}
	values := secretEnvValues(ctx, r.Secrets, pod.Namespace, refs)
	<-r.secretReads
	return sc.with(values)
}
