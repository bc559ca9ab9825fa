package testenv

import (
	"context"
	"reflect"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DelayedLists wraps c so that every List takes its snapshot from c and
// then calls after before the caller sees it: a reader delayed between its
// snapshot and its answer, while the test handles events in between (what a
// cache's informer does concurrently). Every other call goes to c.
func DelayedLists(c client.Client, after func()) client.Client {
	return &delayedLists{Client: c, after: after}
}

type delayedLists struct {
	client.Client
	after func()
}

func (d *delayedLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	err := d.Client.List(ctx, list, opts...)
	d.after()
	return err
}

// StaleGets wraps c so that a Get of an object of the same kind and key as
// one of snapshots returns a copy of that snapshot instead of asking c: a
// cache that has not caught up. Every other call goes to c.
func StaleGets(c client.Client, snapshots ...client.Object) client.Client {
	return &staleGets{Client: c, snapshots: snapshots}
}

type staleGets struct {
	client.Client
	snapshots []client.Object
}

func (s *staleGets) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	for _, snap := range s.snapshots {
		if reflect.TypeOf(snap) == reflect.TypeOf(obj) && client.ObjectKeyFromObject(snap) == key {
			reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(snap.DeepCopyObject()).Elem())
			return nil
		}
	}
	return s.Client.Get(ctx, key, obj, opts...)
}
