package faultinject

import (
	"context"
	"fmt"
	"reflect"
	"sync/atomic"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// StaleGets wraps c so that a Get of an object with the type and key of one
// of snapshots returns a copy of that snapshot instead of asking c: a cache
// that has not seen the latest change to it. Every other call goes to c.
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

// CountingReader is a client.Reader that counts the Lists it passes on to
// Reader: how many (uncached, when Reader is the apiserver) lists a
// controller makes.
type CountingReader struct {
	client.Reader
	lists atomic.Int64
}

// List counts and passes the call on.
func (c *CountingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	c.lists.Add(1)
	return c.Reader.List(ctx, list, opts...)
}

// Lists is how many Lists were made so far.
func (c *CountingReader) Lists() int64 { return c.lists.Load() }

// CountLists wraps c so that its Lists are counted: the returned reader
// tells how many the client made.
func CountLists(c client.Client) (client.Client, *CountingReader) {
	reads := &CountingReader{Reader: c}
	return countedLists{Client: c, reads: reads}, reads
}

type countedLists struct {
	client.Client
	reads *CountingReader
}

func (c countedLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	return c.reads.List(ctx, list, opts...)
}

// StaleLists wraps c so that a List into one of the kinds of snapshots
// returns a copy of that snapshot instead of asking c: a cache that has not
// caught up. Every other call goes to c.
func StaleLists(c client.Client, snapshots ...client.ObjectList) client.Client {
	return &staleLists{Client: c, snapshots: snapshots}
}

type staleLists struct {
	client.Client
	snapshots []client.ObjectList
}

func (s *staleLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	for _, snap := range s.snapshots {
		if reflect.TypeOf(snap) == reflect.TypeOf(list) {
			return copyInto(snap, list)
		}
	}
	return s.Client.List(ctx, list, opts...)
}

// copyInto copies src into dst, two lists of the same type.
func copyInto(src, dst client.ObjectList) error {
	d := reflect.ValueOf(dst)
	c := reflect.ValueOf(src.DeepCopyObject())
	if d.Kind() != reflect.Pointer || d.Type() != c.Type() {
		return fmt.Errorf("cannot copy %T into %T", src, dst)
	}
	d.Elem().Set(c.Elem())
	return nil
}
