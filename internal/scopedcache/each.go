package scopedcache

import (
	"context"
	"fmt"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Each calls fn with each object a List of list's kind with opts would
// return, and stops at fn's first error. Read from a Cache (or a reader
// that wraps one and is an Eacher), a compact kind is expanded one object
// at a time, each dropped once fn returns: a pass over a namespace of
// 100,000 Jobs holds one expanded Job, not a list of 100,000 (issue 26: two
// such lists at a manager's start took its RSS to 841 MiB for a live heap
// of 130 MiB). From any other reader, Each lists. What fn is given is a
// copy it may keep, but keeping every one undoes the point.
func Each(ctx context.Context, r client.Reader, list client.ObjectList, fn func(client.Object) error, opts ...client.ListOption) error {
	if e, ok := r.(Eacher); ok {
		return e.Each(ctx, list, fn, opts...)
	}
	if err := r.List(ctx, list, opts...); err != nil {
		return err
	}
	return eachItem(list, fn)
}

// Eacher is a reader that hands out what it holds one object at a time.
// A reader that wraps a Cache (the manager's, waiting for each kind to
// sync) is one by saying so.
type Eacher interface {
	Each(ctx context.Context, list client.ObjectList, fn func(client.Object) error, opts ...client.ListOption) error
}

// eachReader is a space's reader that can hand out its objects one at a
// time.
type eachReader interface {
	each(ctx context.Context, fn func(client.Object) error, opts ...client.ListOption) error
}

// Each is List, one object at a time (the package's Each).
func (c *Cache) Each(ctx context.Context, list client.ObjectList, fn func(client.Object) error, opts ...client.ListOption) error {
	r, err := c.readerFor(ctx, list, (&client.ListOptions{}).ApplyOptions(opts).Namespace)
	if err != nil {
		return err
	}
	if e, ok := r.(eachReader); ok {
		return e.each(ctx, fn, opts...)
	}
	if err := r.List(ctx, list, opts...); err != nil {
		return err
	}
	return eachItem(list, fn)
}

// eachItem calls fn with each item of a list read.
func eachItem(list client.ObjectList, fn func(client.Object) error) error {
	return apimeta.EachListItem(list, func(o runtime.Object) error {
		obj, ok := o.(client.Object)
		if !ok {
			return fmt.Errorf("scoped cache: a %T in a list", o)
		}
		return fn(obj)
	})
}

// each is List, one expanded object at a time.
func (c compactReader) each(_ context.Context, fn func(client.Object) error, opts ...client.ListOption) error {
	lo := client.ListOptions{}
	lo.ApplyOptions(opts)
	if lo.Continue != "" {
		return fmt.Errorf("continue list option is not supported by the cache")
	}
	var items []any
	for _, idx := range c.s.held.all() {
		got, err := c.itemsOf(idx, &lo)
		if err != nil {
			return err
		}
		items = append(items, got...)
	}
	var n int64
	for _, item := range items {
		if lo.Limit > 0 && n >= lo.Limit {
			break
		}
		if isStub(item) {
			continue
		}
		obj, ok := c.k.expandAny(item).(client.Object)
		if !ok {
			return fmt.Errorf("scoped cache: the cache of %s held a %T", c.s.describe(), item)
		}
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(obj.GetLabels())) {
			continue
		}
		obj.GetObjectKind().SetGroupVersionKind(c.k.gvk)
		n++
		if err := fn(obj); err != nil {
			return err
		}
	}
	return nil
}

// each is List across the spaces, one object at a time.
func (u union) each(ctx context.Context, fn func(client.Object) error, opts ...client.ListOption) error {
	for i, s := range u.spaces {
		if err := s.wait(ctx); err != nil {
			return err
		}
		opts := u.optsFor(i, opts)
		r := u.k.held(s)
		e, ok := r.(eachReader)
		if !ok {
			list, err := u.k.newList()
			if err != nil {
				return err
			}
			if err := r.List(ctx, list, opts...); err != nil {
				return err
			}
			if err := eachItem(list, fn); err != nil {
				return err
			}
			continue
		}
		if err := e.each(ctx, fn, opts...); err != nil {
			return err
		}
	}
	return nil
}
