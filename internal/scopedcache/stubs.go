package scopedcache

import (
	"context"
	"fmt"
	"slices"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/deckhand-dev/deckhand/internal/scopedcache/intern"
)

// Stubs: what the cluster-wide informer holds of namespaces nothing needs.
//
// Above ClusterWideAbove namespaces one informer lists and watches a kind
// in every namespace, and it would hold every pod and Job of the cluster,
// those of namespaces no Deckhand object acts in too: unrelated objects
// would cost memory again (issue 26: 2,000 unrelated pods and 2,000 Jobs
// took the manager from 8 to 32 MiB of heap). So the cluster-wide informer
// keeps an object of a namespace that is not needed when the object
// arrives as a stub: its name, namespace and resourceVersion, nothing else
// (a few hundred bytes with its store entries, where an empty corev1.Pod or
// batchv1.Job is over 1,200). The namespaces it stubbed are remembered
// (kind.stubbed), and the cluster-wide space answers for none of them:
//   - a read in such a namespace is answered by an informer of the
//     namespace's own, started for the read as in per-namespace mode (or
//     already running, which then tells the namespace: claimLocked);
//   - a namespace needed after its objects were stubbed is held by an
//     informer of its own, handed the namespace once it synced, for as long
//     as the kind stays cluster-wide;
//   - a read across namespaces leaves the stubs out and takes those
//     namespaces from their own informers.
//
// Stubs are of another type than the kind, so they never leave the
// package: handlers are not told of them (nothing acts in a namespace
// nothing needs; a namespace that becomes needed is told from its own
// informer's list), indexes skip them, and a read across namespaces
// filters them out by their label before the cache copies them into the
// caller's list.

// StubLabel marks an object the cluster-wide informer holds as a stub.
const StubLabel = "scopedcache.deckhand.dev/stub"

// stub is what the cluster-wide informer holds of an object of a namespace
// nothing needs: its key and resourceVersion (the informer tells a resync
// from a change by it), nothing else. A metav1.PartialObjectMetadata, the
// first stub, cost 869 B of heap with its store entries (its ObjectMeta is
// 256 bytes before any string, and its label map more); a stub costs about
// its key (TestStubCostsAboutItsKey). Its namespace string is shared by the
// stubs of a namespace.
type stub struct {
	name, namespace, resourceVersion string
}

// A stub is a client.Object for the informer's key and index functions, a
// list's label selector and controller-runtime's index wrapper: it tells
// its name, namespace and resourceVersion and StubLabel (a map made on each
// call), zero for the rest, and ignores every setter but those three.
var _ client.Object = &stub{}

// GetObjectKind has no kind to tell: a stub never leaves the package.
func (s *stub) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies the stub.
func (s *stub) DeepCopyObject() runtime.Object { c := *s; return &c }

func (s *stub) GetNamespace() string                          { return s.namespace }
func (s *stub) SetNamespace(ns string)                        { s.namespace = ns }
func (s *stub) GetName() string                               { return s.name }
func (s *stub) SetName(name string)                           { s.name = name }
func (s *stub) GetResourceVersion() string                    { return s.resourceVersion }
func (s *stub) SetResourceVersion(v string)                   { s.resourceVersion = v }
func (s *stub) GetLabels() map[string]string                  { return map[string]string{StubLabel: ""} }
func (s *stub) SetLabels(map[string]string)                   {}
func (s *stub) GetGenerateName() string                       { return "" }
func (s *stub) SetGenerateName(string)                        {}
func (s *stub) GetUID() types.UID                             { return "" }
func (s *stub) SetUID(types.UID)                              {}
func (s *stub) GetGeneration() int64                          { return 0 }
func (s *stub) SetGeneration(int64)                           {}
func (s *stub) GetSelfLink() string                           { return "" }
func (s *stub) SetSelfLink(string)                            {}
func (s *stub) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (s *stub) SetCreationTimestamp(metav1.Time)              {}
func (s *stub) GetDeletionTimestamp() *metav1.Time            { return nil }
func (s *stub) SetDeletionTimestamp(*metav1.Time)             {}
func (s *stub) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (s *stub) SetDeletionGracePeriodSeconds(*int64)          {}
func (s *stub) GetAnnotations() map[string]string             { return nil }
func (s *stub) SetAnnotations(map[string]string)              {}
func (s *stub) GetFinalizers() []string                       { return nil }
func (s *stub) SetFinalizers([]string)                        {}
func (s *stub) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (s *stub) SetOwnerReferences([]metav1.OwnerReference)    {}
func (s *stub) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (s *stub) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

// isStub reports whether obj (or the object of a deletion tombstone) is a
// stub.
func isStub(obj any) bool {
	if d, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = d.Obj
	}
	_, ok := obj.(*stub)
	return ok
}

// stubOf is o reduced to a stub, its namespace shared with the other stubs
// of the namespace.
func stubOf(o client.Object) *stub {
	return &stub{name: o.GetName(), namespace: intern.String(o.GetNamespace()), resourceVersion: o.GetResourceVersion()}
}

// skipStubs is extract for everything but stubs, which are in no index.
func skipStubs(extract client.IndexerFunc) client.IndexerFunc {
	return func(o client.Object) []string {
		if isStub(o) {
			return nil
		}
		return extract(o)
	}
}

// skipStubsRaw is indexers for everything but stubs.
func skipStubsRaw(indexers toolscache.Indexers) toolscache.Indexers {
	out := make(toolscache.Indexers, len(indexers))
	for name, f := range indexers {
		out[name] = func(obj any) ([]string, error) {
			if isStub(obj) {
				return nil, nil
			}
			return f(obj)
		}
	}
	return out
}

// neededHas reports whether namespace was needed at the last look at the
// needs; before the first look every namespace counts as needed.
func (k *kind) neededHas(namespace string) bool {
	n := k.neededNow.Load()
	return n == nil || n.Has(namespace)
}

// isStubbed reports whether the cluster-wide space holds stubs of
// namespace.
func (k *kind) isStubbed(namespace string) bool {
	k.stubMu.Lock()
	defer k.stubMu.Unlock()
	return k.stubbed.Has(namespace)
}

// markStubbed records that the cluster-wide space holds stubs of
// namespace, and asks for a look at the needs the first time: the
// namespace may have become needed while its objects were stubbed.
func (k *kind) markStubbed(namespace string) {
	k.stubMu.Lock()
	known := k.stubbed.Has(namespace)
	k.stubbed.Insert(namespace)
	k.stubMu.Unlock()
	if !known {
		k.pokeRun()
	}
}

// resetStubbed forgets the stubbed namespaces: a new cluster-wide space
// starts.
func (k *kind) resetStubbed() {
	k.stubMu.Lock()
	defer k.stubMu.Unlock()
	k.stubbed = sets.New[string]()
}

// stubbing wraps the transform the cluster-wide informer of the kind
// applies (inner, nil for none): objects of namespaces not needed become
// stubs.
func (k *kind) stubbing(inner toolscache.TransformFunc) toolscache.TransformFunc {
	return func(obj any) (any, error) {
		o, ok := obj.(client.Object)
		if ok && !k.neededHas(o.GetNamespace()) {
			k.markStubbed(o.GetNamespace())
			return stubOf(o), nil
		}
		if inner != nil {
			return inner(obj)
		}
		return obj, nil
	}
}

// clusterWideOptions are opts with the kind's transform wrapped by
// stubbing, for the cluster-wide space.
func (k *kind) clusterWideOptions(opts cache.Options) (cache.Options, error) {
	by := make(map[client.Object]cache.ByObject, len(opts.ByObject)+1)
	found := false
	for obj, b := range opts.ByObject {
		gvk, err := apiutil.GVKForObject(obj, opts.Scheme)
		if err != nil {
			return opts, fmt.Errorf("scoped cache: %w", err)
		}
		if gvk == k.gvk {
			inner := b.Transform
			if inner == nil {
				inner = opts.DefaultTransform
			}
			b.Transform, found = k.stubbing(inner), true
		}
		by[obj] = b
	}
	if !found {
		by[k.obj] = cache.ByObject{Transform: k.stubbing(opts.DefaultTransform)}
	}
	opts.ByObject = by
	return opts, nil
}

// withoutStubs lists across namespaces while the kind is cluster-wide:
// from the cluster-wide space without its stubs, and the namespaces it
// stubbed from their own spaces (spaces).
type withoutStubs struct {
	k      *kind
	all    *space
	spaces []*space
}

func (w withoutStubs) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return fmt.Errorf("scoped cache: a %s is read in its namespace", w.k.gvk.Kind)
}

func (w withoutStubs) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if err := w.all.wait(ctx); err != nil {
		return err
	}
	// The stubs are left out by their label, before the cache copies what
	// it holds into list (a stub is not of list's kind).
	if err := w.k.held(w.all).List(ctx, list, withoutStubLabel(opts)...); err != nil {
		return err
	}
	items, err := apimeta.ExtractList(list)
	if err != nil {
		return err
	}
	// The namespaces their own spaces tell are left to them whole: the
	// cluster-wide space holds stubs of them, and whole objects of what
	// changed since they were needed.
	own := sets.New[string]()
	for _, s := range w.spaces {
		own.Insert(s.namespace)
	}
	kept := items[:0]
	for _, it := range items {
		if o, ok := it.(client.Object); !ok || !own.Has(o.GetNamespace()) {
			kept = append(kept, it)
		}
	}
	if len(w.spaces) > 0 {
		more, ok := list.DeepCopyObject().(client.ObjectList)
		if !ok {
			return fmt.Errorf("scoped cache: %T is not a list", list)
		}
		if err := (union{k: w.k, spaces: w.spaces}).List(ctx, more, opts...); err != nil {
			return err
		}
		extra, err := apimeta.ExtractList(more)
		if err != nil {
			return err
		}
		kept = append(kept, extra...)
	}
	return apimeta.SetList(list, kept)
}

var _ client.Reader = withoutStubs{}

// withoutStubLabel is opts with their label selector narrowed to objects
// that are not stubs: the cache filters by labels before it copies what it
// holds into a list, which a stub (not of the list's kind) cannot go into.
func withoutStubLabel(opts []client.ListOption) []client.ListOption {
	lo := client.ListOptions{}
	lo.ApplyOptions(opts)
	sel := labels.Everything()
	if lo.LabelSelector != nil {
		sel = lo.LabelSelector
	}
	return append(slices.Clone(opts), client.MatchingLabelsSelector{Selector: sel.Add(notAStub)})
}

// notAStub selects what has no StubLabel.
var notAStub = func() labels.Requirement {
	r, err := labels.NewRequirement(StubLabel, selection.DoesNotExist, nil)
	if err != nil {
		panic(err) // a constant, valid key: as regexp.MustCompile
	}
	return *r
}()
