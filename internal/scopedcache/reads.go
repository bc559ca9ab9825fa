package scopedcache

// Reads: which space answers a read of a namespace, or of all of them, and
// the indexes every space gets.

import (
	"context"
	"fmt"
	"time"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// reader is what answers a read in namespace ("": all namespaces).
func (k *kind) reader(ctx context.Context, namespace string) (client.Reader, error) {
	if k.allowed != nil && namespace != "" && !k.allowed.Has(namespace) {
		return nil, fmt.Errorf("scoped cache: namespace %q is not watched by this manager", namespace)
	}
	k.mu.Lock()
	now := time.Now()
	all, s := k.spaces[allNamespaces], k.spaces[namespace]
	var err error
	// The space whose events reach handlers answers, so that reads and
	// deliveries of a namespace move at the same instant, the handover's:
	// a space that synced before it is handed the namespace (the
	// cluster-wide one as the 17th namespace arrives, a namespace's own on
	// the way back) may lag or lead what handlers were told.
	switch owner := k.ownerOf(namespace); {
	case namespace == "":
		r := k.acrossLocked(now)
		k.mu.Unlock()
		return r, nil
	case owner == nil || owner == all && k.isStubbed(namespace):
		// Nothing tells it, or the cluster-wide space holds stubs of it
		// (and tells only what changed since it was needed): an informer
		// of its own answers, and is handed it once it synced.
		switch {
		case s == nil:
			s, err = k.readSpaceLocked(namespace, now)
		case owner == all || !regress.unclaimedOwn:
			// Its own started before the cluster-wide space stubbed it,
			// or nothing tells it: its own answers only as the
			// namespace's owner.
			k.claimLocked(s)
		}
	case regress.readsLead:
		s = k.leadingLocked(namespace, owner)
	default:
		s = owner
	}
	if err != nil {
		k.mu.Unlock()
		return nil, err
	}
	if k.onRead != nil {
		k.onRead(namespace, s, k.owners.Load())
	}
	s.lastRead = now
	k.mu.Unlock()
	if err := s.wait(ctx); err != nil {
		return nil, err
	}
	return k.held(s), nil
}

// leadingLocked is the space that answered a read of namespace when reads
// moved to a space as soon as it synced, before its events did: the defect
// the schedules' self-test puts back (regress.readsLead). k.mu is held.
func (k *kind) leadingLocked(namespace string, owner *space) *space {
	all, s := k.spaces[allNamespaces], k.spaces[namespace]
	if k.clusterWide && all != nil && !k.isStubbed(namespace) && (s == nil || isClosed(all.synced)) {
		s = all
	}
	if s == nil {
		s = owner
	}
	return s
}

// acrossLocked answers a read across namespaces: the needed namespaces'
// spaces, or, cluster-wide, that space without its stubs and the needed
// namespaces it stubbed from their own spaces. k.mu is held.
func (k *kind) acrossLocked(now time.Time) client.Reader {
	all := k.spaces[allNamespaces]
	if k.clusterWide && all != nil {
		var own []*space
		for ns, o := range k.spaces {
			if ns != allNamespaces && o.needed && k.isStubbed(ns) {
				if k.ownerOf(ns) == all {
					k.claimLocked(o) // as a read of the namespace alone does
				}
				o.lastRead = now
				own = append(own, o)
			}
		}
		all.lastRead = now
		return withoutStubs{k: k, all: all, spaces: own}
	}
	// Each needed namespace is answered by its owner, as a read of it
	// alone is: the cluster-wide space, back below the threshold, still
	// tells a namespace until its own space has synced and been handed it.
	u := union{k: k}
	for ns, s := range k.spaces {
		if !s.needed {
			continue
		}
		s.lastRead = now
		switch owner := k.ownerOf(ns); {
		case owner == s || ns == allNamespaces || regress.acrossOwn:
			u.spaces, u.in = append(u.spaces, s), append(u.in, "")
		case owner == nil || owner == all && k.isStubbed(ns):
			k.claimLocked(s) // as a read of the namespace alone does
			u.spaces, u.in = append(u.spaces, s), append(u.in, "")
		default:
			owner.lastRead = now
			u.spaces, u.in = append(u.spaces, owner), append(u.in, ns)
		}
	}
	return u
}

// readSpaceLocked starts the informer of a namespace nothing needs, for a
// read; it stops keepFor after the last. k.mu is held.
func (k *kind) readSpaceLocked(namespace string, now time.Time) (*space, error) {
	s, err := k.startLocked(namespace)
	if err != nil {
		return nil, err
	}
	s.needed, s.unneededSince = false, now
	return s, nil
}

// indexField records the index for later spaces and adds it to the
// current ones.
func (k *kind) indexField(ctx context.Context, field string, extract client.IndexerFunc) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.indexers = append(k.indexers, indexer{field: field, extract: extract})
	for _, s := range k.spaces {
		if err := s.cache.IndexField(ctx, k.obj, field, k.indexable(extract)); err != nil {
			return err
		}
	}
	return nil
}

// union lists across the spaces of the needed namespaces.
type union struct {
	k      *kind
	spaces []*space
	// in is, for each of spaces, the one namespace it is read in ("" or
	// none: all it holds): a space read for a namespace it still tells.
	in []string
}

// optsFor is opts for the i-th of u's spaces.
func (u union) optsFor(i int, opts []client.ListOption) []client.ListOption {
	if i >= len(u.in) || u.in[i] == "" {
		return opts
	}
	return append(withoutStubLabel(opts), client.InNamespace(u.in[i]))
}

func (u union) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return fmt.Errorf("scoped cache: a %s is read in its namespace", u.k.gvk.Kind)
}

func (u union) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	var items []runtime.Object
	for i, s := range u.spaces {
		if err := s.wait(ctx); err != nil {
			return err
		}
		part, ok := list.DeepCopyObject().(client.ObjectList)
		if !ok {
			return fmt.Errorf("scoped cache: %T is not a list", list)
		}
		if err := u.k.held(s).List(ctx, part, u.optsFor(i, opts)...); err != nil {
			return err
		}
		objs, err := apimeta.ExtractList(part)
		if err != nil {
			return err
		}
		items = append(items, objs...)
	}
	return apimeta.SetList(list, items)
}
