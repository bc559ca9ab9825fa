package modelbox

import (
	"crypto/sha256"
	"encoding/json"
	"sync"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// verified remembers, per child, the state in which a pass last found the
// fields Deckhand owns on it equal to what its ModelBox wants, so that a
// later pass that sees the child and the wish unchanged can skip reading
// those fields out of the child's managedFields (managedfields.ExtractInto:
// about a third of the manager's CPU while 300 ModelBoxes rolled out).
// Most passes of a rollout come from the Deployment's status updates, which
// change nothing Deckhand owns.
//
// A child's fingerprint covers all that the extraction reads and more: its
// UID, metadata and spec, and the managedFields entry of Deckhand's applies.
// It leaves out only the status, the resourceVersion and other field
// managers' entries. So any edit to the child's metadata or spec, by anyone,
// and any field taken from Deckhand changes the fingerprint, and the pass
// compares in full again: drift is still seen. Being memory only, a
// restarted manager compares each child in full once.
type verified struct {
	mu   sync.Mutex
	seen map[verifiedKey]fingerprints
	// compared counts the full comparisons made, which the tests read.
	compared atomic.Int64
}

// verifiedKey names a child: its ModelBox and its kind.
type verifiedKey struct {
	box  types.NamespacedName
	kind string
}

// fingerprints are a child's and the wish's, as fingerprintsOf takes them.
type fingerprints struct {
	live, want [sha256.Size]byte
}

func newVerified() *verified {
	return &verified{seen: map[verifiedKey]fingerprints{}}
}

// holds says whether the child was found to match with these fingerprints.
func (v *verified) holds(key verifiedKey, fp fingerprints) bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	seen, found := v.seen[key]
	return found && seen == fp
}

// remember records that the child matched with these fingerprints.
func (v *verified) remember(key verifiedKey, fp fingerprints) {
	v.mu.Lock()
	defer v.mu.Unlock()
	v.seen[key] = fp
}

// drop forgets one child, which was written or is gone.
func (v *verified) drop(key verifiedKey) {
	v.mu.Lock()
	defer v.mu.Unlock()
	delete(v.seen, key)
}

// forget drops every child of the ModelBox box names, which is gone.
func (v *verified) forget(box types.NamespacedName) {
	v.mu.Lock()
	defer v.mu.Unlock()
	for key := range v.seen {
		if key.box == box {
			delete(v.seen, key)
		}
	}
}

// fingerprintsOf takes the fingerprints of live, a cached child, and want,
// its apply configuration; ok is false for a kind it does not know or what
// it cannot encode, which then always gets the full comparison.
func fingerprintsOf(live client.Object, want runtime.ApplyConfiguration) (fp fingerprints, ok bool) {
	var bare client.Object
	switch o := live.(type) {
	case *appsv1.Deployment:
		c := *o
		c.Status = appsv1.DeploymentStatus{}
		bare = &c
	case *corev1.Service:
		c := *o
		c.Status = corev1.ServiceStatus{}
		bare = &c
	case *autoscalingv2.HorizontalPodAutoscaler:
		c := *o
		c.Status = autoscalingv2.HorizontalPodAutoscalerStatus{}
		bare = &c
	case *policyv1.PodDisruptionBudget:
		c := *o
		c.Status = policyv1.PodDisruptionBudgetStatus{}
		bare = &c
	default:
		return fp, false
	}
	// bare is a shallow copy: set its metadata fields, never change what
	// they point at.
	bare.SetResourceVersion("")
	bare.SetManagedFields(appliedByDeckhand(live.GetManagedFields()))
	liveJSON, err := json.Marshal(bare)
	if err != nil {
		return fp, false
	}
	wantJSON, err := json.Marshal(want)
	if err != nil {
		return fp, false
	}
	return fingerprints{live: sha256.Sum256(liveJSON), want: sha256.Sum256(wantJSON)}, true
}

// appliedByDeckhand are the managedFields entries of Deckhand's applies to
// the object itself (not a subresource), what the extraction reads, without
// their times.
func appliedByDeckhand(entries []metav1.ManagedFieldsEntry) []metav1.ManagedFieldsEntry {
	var out []metav1.ManagedFieldsEntry
	for _, e := range entries {
		if e.Manager == FieldManager && e.Operation == metav1.ManagedFieldsOperationApply && e.Subresource == "" {
			e.Time = nil
			out = append(out, e)
		}
	}
	return out
}
