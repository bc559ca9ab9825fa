package podset

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
)

// templateHash names a template: pods whose hash label differs from the
// PodSet's are outdated. It hashes the template as written (defaulting by
// the apiserver on the pods does not make them look outdated), in a
// canonical form that a Deckhand or library upgrade does not change: the
// template's JSON with every absent-equivalent value (null, "", {} and [])
// removed and object keys sorted. A new optional field in a newer
// k8s.io/api, or a field that changes from omitempty to not, encodes to
// the same form and so to the same hash; only a change a user made to the
// template changes it. 64 bits of SHA-256 make a collision between two
// templates of one PodSet practically impossible (Deployments need a
// collision count because they hash with 32-bit FNV).
func templateHash(t corev1.PodTemplateSpec) string {
	sum := sha256.Sum256(canonicalJSON(t))
	return hex.EncodeToString(sum[:8])
}

// canonicalJSON encodes v with absent-equivalent values pruned and keys
// sorted (encoding/json sorts map keys).
func canonicalJSON(v any) []byte {
	raw, err := json.Marshal(v)
	if err != nil {
		// A PodTemplateSpec always marshals; this is unreachable.
		panic(fmt.Sprintf("marshalling a pod template: %v", err))
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber() // numbers keep their exact text
	var generic any
	if err := d.Decode(&generic); err != nil {
		panic(fmt.Sprintf("decoding a pod template: %v", err))
	}
	out, err := json.Marshal(prune(generic))
	if err != nil {
		panic(fmt.Sprintf("marshalling a pod template: %v", err))
	}
	return out
}

// prune drops null, "", {} and [] from objects and arrays, recursively, and
// returns nil when v itself is one of them. false and 0 stay: for pointer
// fields they differ from absent (automountServiceAccountToken: false).
func prune(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if p := prune(e); p == nil {
				delete(x, k)
			} else {
				x[k] = p
			}
		}
		if len(x) == 0 {
			return nil
		}
		return x
	case []any:
		// An element keeps its place even when empty: position matters.
		for i, e := range x {
			if p := prune(e); p != nil {
				x[i] = p
			} else {
				x[i] = map[string]any{}
			}
		}
		if len(x) == 0 {
			return nil
		}
		return x
	case string:
		if x == "" {
			return nil
		}
		return x
	default:
		return v
	}
}

// legacyTemplateHash is the hash Deckhand before the canonical form put on
// pods (FNV-32a of the template's JSON). A pod carrying it for the current
// template is up to date: upgrading Deckhand must not roll every PodSet.
func legacyTemplateHash(t corev1.PodTemplateSpec) string {
	b, err := json.Marshal(t)
	if err != nil {
		panic(fmt.Sprintf("marshalling a pod template: %v", err))
	}
	h := fnv.New32a()
	_, _ = h.Write(b)
	return rand.SafeEncodeString(fmt.Sprint(h.Sum32()))
}

// relabelLegacyHash makes the in-memory copies of pods that carry the legacy
// hash of the current template carry the current hash, so that every later
// step sees them as up to date. Nothing is written to the apiserver.
func relabelLegacyHash(pods []*corev1.Pod, tmpl corev1.PodTemplateSpec, hash string) {
	legacy := ""
	for _, p := range pods {
		if p.Labels[appsv1beta1.PodTemplateHashLabel] == hash {
			continue
		}
		if legacy == "" {
			legacy = legacyTemplateHash(tmpl)
		}
		if p.Labels[appsv1beta1.PodTemplateHashLabel] == legacy {
			p.Labels = maps.Clone(p.Labels) // shared with the cache
			p.Labels[appsv1beta1.PodTemplateHashLabel] = hash
		}
	}
}
