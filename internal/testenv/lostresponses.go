package testenv

import (
	"context"
	"errors"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrResponseLost is what a client from LoseStatusResponses returns for a
// status patch that reached the apiserver but whose answer it dropped.
var ErrResponseLost = errors.New("the status patch was applied but its response was lost")

// LoseStatusResponses wraps c so that its next n status patches are sent and
// applied, but answer ErrResponseLost and leave the object as it was, as
// when a connection breaks after the apiserver committed a write. Every
// other call goes to c.
func LoseStatusResponses(c client.Client, n int) client.Client {
	return &lostResponses{Client: c, left: n}
}

type lostResponses struct {
	client.Client
	mu   sync.Mutex
	left int
}

func (c *lostResponses) Status() client.SubResourceWriter {
	return lossyStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type lossyStatus struct {
	client.SubResourceWriter
	c *lostResponses
}

func (w lossyStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	w.c.mu.Lock()
	lose := w.c.left > 0
	if lose {
		w.c.left--
	}
	w.c.mu.Unlock()
	if !lose {
		return w.SubResourceWriter.Patch(ctx, obj, patch, opts...)
	}
	cp, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return errors.New("not a client.Object")
	}
	if err := w.SubResourceWriter.Patch(ctx, cp, patch, opts...); err != nil {
		return err
	}
	return ErrResponseLost
}

// ErrCreateResponseLost is what a client from LoseCreateResponses returns
// for a create that reached the apiserver but whose answer it dropped.
var ErrCreateResponseLost = errors.New("the create was applied but its response was lost")

// LoseCreateResponses wraps c so that its next n creates are sent and
// applied, but answer ErrCreateResponseLost and leave the object as it was,
// as when a connection breaks, or etcd restarts, after the write was
// committed. Every other call goes to c.
func LoseCreateResponses(c client.Client, n int) client.Client {
	return &lostCreates{Client: c, left: n}
}

type lostCreates struct {
	client.Client
	mu   sync.Mutex
	left int
}

func (c *lostCreates) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.mu.Lock()
	lose := c.left > 0
	if lose {
		c.left--
	}
	c.mu.Unlock()
	if !lose {
		return c.Client.Create(ctx, obj, opts...)
	}
	cp, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return errors.New("not a client.Object")
	}
	if err := c.Client.Create(ctx, cp, opts...); err != nil {
		return err
	}
	return ErrCreateResponseLost
}
