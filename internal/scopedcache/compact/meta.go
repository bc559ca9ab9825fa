// Package compact holds the compact forms of what cached objects carry: Meta,
// an object's metadata in fewer bytes than a metav1.ObjectMeta, which a
// compact type embeds to be a metav1.Object.
package compact

import (
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/deckhand-dev/deckhand/internal/scopedcache/intern"
)

// Meta is the metadata of an object held compact (scopedcache.Need.Expand): what a
// metav1.ObjectMeta holds but generateName, selfLink and managedFields
// (which no cache keeps), in 192 bytes instead of 232, labels as key, value
// pairs (a slice of four labels is 128 bytes, a map of them over 300) and
// the strings many objects repeat interned (namespace, label keys and
// values, owner references). A compact type embeds it to be a
// metav1.Object, and expands it with ObjectMeta.
type Meta struct {
	// uid is the UID, or a NUL and its 16 bytes when packed (a UUID's
	// text is 36 bytes, 48 allocated; packed 24) unless a label shares
	// its text.
	name, namespace, uid, resourceVersion string
	generation                            int64
	creation                              metav1.Time
	deletion                              *metav1.Time
	grace                                 *int64
	labels                                []string
	annotations                           map[string]string
	owners                                []metav1.OwnerReference
	finalizers                            []string
}

var _ metav1.Object = &Meta{}

// MetaOf is what a Meta holds of m, sharing m's content but its labels.
func MetaOf(m *metav1.ObjectMeta) Meta {
	out := Meta{name: m.Name, namespace: intern.String(m.Namespace), uid: string(m.UID), resourceVersion: m.ResourceVersion,
		generation: m.Generation, creation: m.CreationTimestamp, deletion: m.DeletionTimestamp, grace: m.DeletionGracePeriodSeconds,
		annotations: m.Annotations, finalizers: m.Finalizers}
	out.SetLabels(m.Labels)
	if !slices.Contains(out.labels, out.uid) {
		out.uid = packUID(out.uid)
	}
	if len(m.OwnerReferences) > 0 {
		out.owners = slices.Clone(m.OwnerReferences)
		for i := range out.owners {
			// Objects of one owner share all of it.
			r := &out.owners[i]
			r.APIVersion, r.Kind, r.Name, r.UID = intern.String(r.APIVersion), intern.String(r.Kind), intern.String(r.Name), types.UID(intern.String(string(r.UID)))
			r.Controller, r.BlockOwnerDeletion = shared(r.Controller), shared(r.BlockOwnerDeletion)
		}
	}
	return out
}

// ObjectMeta is the metadata m holds, new.
func (m *Meta) ObjectMeta() metav1.ObjectMeta {
	c := m.DeepCopy()
	return metav1.ObjectMeta{Name: c.name, Namespace: c.namespace, UID: m.GetUID(), ResourceVersion: c.resourceVersion,
		Generation: c.generation, CreationTimestamp: c.creation, DeletionTimestamp: c.deletion, DeletionGracePeriodSeconds: c.grace,
		Labels: m.GetLabels(), Annotations: c.annotations, OwnerReferences: c.owners, Finalizers: c.finalizers}
}

// DeepCopy is a copy of m sharing nothing a writer could change.
func (m *Meta) DeepCopy() Meta {
	out := *m
	if m.deletion != nil {
		out.deletion = m.deletion.DeepCopy()
	}
	if m.grace != nil {
		out.grace = new(*m.grace)
	}
	out.labels = slices.Clone(m.labels)
	if m.annotations != nil {
		out.annotations = make(map[string]string, len(m.annotations))
		for k, v := range m.annotations {
			out.annotations[k] = v
		}
	}
	if m.owners != nil {
		out.owners = make([]metav1.OwnerReference, len(m.owners))
		for i := range m.owners {
			m.owners[i].DeepCopyInto(&out.owners[i])
		}
	}
	out.finalizers = slices.Clone(m.finalizers)
	return out
}

var yes, no = true, false

// shared is a pointer to b's value that every Meta shares (DeepCopy and
// ObjectMeta copy it).
func shared(b *bool) *bool {
	switch {
	case b == nil:
		return nil
	case *b:
		return &yes
	default:
		return &no
	}
}

// GetNamespace is metav1.Object's.
func (m *Meta) GetNamespace() string { return m.namespace }

// SetNamespace is metav1.Object's.
func (m *Meta) SetNamespace(namespace string) { m.namespace = intern.String(namespace) }

// GetName is metav1.Object's.
func (m *Meta) GetName() string { return m.name }

// SetName is metav1.Object's.
func (m *Meta) SetName(name string) { m.name = name }

// GetGenerateName is metav1.Object's.
func (m *Meta) GetGenerateName() string { return "" }

// SetGenerateName is metav1.Object's.
func (m *Meta) SetGenerateName(string) {}

// GetUID is metav1.Object's.
func (m *Meta) GetUID() types.UID {
	if len(m.uid) == 17 && m.uid[0] == 0 {
		return types.UID(unpackUID(m.uid[1:]))
	}
	return types.UID(m.uid)
}

// SetUID is metav1.Object's.
func (m *Meta) SetUID(uid types.UID) { m.uid = string(uid) }

// GetResourceVersion is metav1.Object's.
func (m *Meta) GetResourceVersion() string { return m.resourceVersion }

// SetResourceVersion is metav1.Object's.
func (m *Meta) SetResourceVersion(version string) { m.resourceVersion = version }

// GetGeneration is metav1.Object's.
func (m *Meta) GetGeneration() int64 { return m.generation }

// SetGeneration is metav1.Object's.
func (m *Meta) SetGeneration(generation int64) { m.generation = generation }

// GetSelfLink is metav1.Object's.
func (m *Meta) GetSelfLink() string { return "" }

// SetSelfLink is metav1.Object's.
func (m *Meta) SetSelfLink(string) {}

// GetCreationTimestamp is metav1.Object's.
func (m *Meta) GetCreationTimestamp() metav1.Time { return m.creation }

// SetCreationTimestamp is metav1.Object's.
func (m *Meta) SetCreationTimestamp(t metav1.Time) { m.creation = t }

// GetDeletionTimestamp is metav1.Object's.
func (m *Meta) GetDeletionTimestamp() *metav1.Time { return m.deletion }

// SetDeletionTimestamp is metav1.Object's.
func (m *Meta) SetDeletionTimestamp(t *metav1.Time) { m.deletion = t }

// GetDeletionGracePeriodSeconds is metav1.Object's.
func (m *Meta) GetDeletionGracePeriodSeconds() *int64 {
	return m.grace
}

// SetDeletionGracePeriodSeconds is metav1.Object's.
func (m *Meta) SetDeletionGracePeriodSeconds(s *int64) { m.grace = s }

// GetAnnotations is metav1.Object's.
func (m *Meta) GetAnnotations() map[string]string { return m.annotations }

// SetAnnotations is metav1.Object's.
func (m *Meta) SetAnnotations(a map[string]string) { m.annotations = a }

// GetFinalizers is metav1.Object's.
func (m *Meta) GetFinalizers() []string { return m.finalizers }

// SetFinalizers is metav1.Object's.
func (m *Meta) SetFinalizers(f []string) { m.finalizers = f }

// GetOwnerReferences is metav1.Object's.
func (m *Meta) GetOwnerReferences() []metav1.OwnerReference { return m.owners }

// SetOwnerReferences is metav1.Object's.
func (m *Meta) SetOwnerReferences(r []metav1.OwnerReference) { m.owners = r }

// GetManagedFields is metav1.Object's.
func (m *Meta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }

// SetManagedFields is metav1.Object's.
func (m *Meta) SetManagedFields([]metav1.ManagedFieldsEntry) {}

// GetLabels are the labels, a map of its own (nil when there are none;
// empty when they were set empty).
func (m *Meta) GetLabels() map[string]string {
	if m.labels == nil {
		return nil
	}
	out := make(map[string]string, len(m.labels)/2)
	for i := 0; i+1 < len(m.labels); i += 2 {
		out[m.labels[i]] = m.labels[i+1]
	}
	return out
}

// SetLabels sets the labels: keys and values interned (objects of one
// owner share their values), but a value equal to the object's name or UID
// (a Job's job-name and controller-uid labels), which shares that string
// instead.
func (m *Meta) SetLabels(in map[string]string) {
	m.labels = nil
	if in == nil {
		return
	}
	m.labels = make([]string, 0, 2*len(in))
	for k, v := range in {
		switch v {
		case m.name:
			v = m.name
		case string(m.GetUID()):
			v = string(m.GetUID())
		default:
			v = intern.String(v)
		}
		m.labels = append(m.labels, intern.String(k), v)
	}
}

// packUID is a NUL and uid's 16 bytes when it is a UUID as the apiserver
// writes it (lower-case hex, hyphens at 8, 13, 18 and 23; no UID starts
// with a NUL), uid itself otherwise.
func packUID(uid string) string {
	if len(uid) != 36 {
		return uid
	}
	var b [17]byte
	j := 1
	for i := 0; i < 36; i++ {
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if uid[i] != '-' {
				return uid
			}
			continue
		}
		hi, ok1 := fromHex(uid[i])
		lo, ok2 := fromHex(uid[i+1])
		if !ok1 || !ok2 {
			return uid
		}
		b[j] = hi<<4 | lo
		j++
		i++
	}
	return string(b[:])
}

func fromHex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

// unpackUID is the text of a UID packUID packed.
func unpackUID(b string) string {
	const digits = "0123456789abcdef"
	out := make([]byte, 0, 36)
	for i := 0; i < len(b); i++ {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			out = append(out, '-')
		}
		out = append(out, digits[b[i]>>4], digits[b[i]&0xf])
	}
	return string(out)
}
