package faultinject

import (
	"context"
	"errors"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// ErrResponseLost is what a client from LoseStatusResponses returns for a
// status patch that reached the apiserver but whose answer it dropped.
var ErrResponseLost = errors.New("the status patch was applied but its response was lost")

// ErrCreateResponseLost is what a client from LoseCreateResponses returns
// for a create that reached the apiserver but whose answer it dropped.
var ErrCreateResponseLost = errors.New("the create was applied but its response was lost")

// LoseStatusResponses wraps c so that its next n status patches are sent and
// applied, but answer ErrResponseLost and leave the object as it was, as
// when a connection breaks after the apiserver committed a write. Every
// other call goes to c.
func LoseStatusResponses(c client.Client, n int) client.Client {
	return &lostResponses{Client: c, losses: losses{left: n}}
}

type lostResponses struct {
	client.Client
	losses
}

func (c *lostResponses) Status() client.SubResourceWriter {
	return lossyStatus{SubResourceWriter: c.Client.Status(), c: c}
}

type lossyStatus struct {
	client.SubResourceWriter
	c *lostResponses
}

func (w lossyStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
	return w.c.send(obj, ErrResponseLost, func(obj client.Object) error { return w.SubResourceWriter.Patch(ctx, obj, patch, opts...) })
}

// LoseCreateResponses wraps c so that its next n creates are sent and
// applied, but answer ErrCreateResponseLost and leave the object as it was,
// as when a connection breaks, or etcd restarts, after the write was
// committed. Every other call goes to c.
func LoseCreateResponses(c client.Client, n int) client.Client {
	return &lostCreates{Client: c, losses: losses{left: n}}
}

type lostCreates struct {
	client.Client
	losses
}

func (c *lostCreates) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	return c.send(obj, ErrCreateResponseLost, func(obj client.Object) error { return c.Client.Create(ctx, obj, opts...) })
}

// losses counts down the answers still to lose.
type losses struct {
	mu   sync.Mutex
	left int
}

// send writes obj through write. While answers are left to lose, it writes
// a copy instead and, once the write went through, answers lost, with obj
// as it was.
func (l *losses) send(obj client.Object, lost error, write func(client.Object) error) error {
	l.mu.Lock()
	lose := l.left > 0
	if lose {
		l.left--
	}
	l.mu.Unlock()
	if !lose {
		return write(obj)
	}
	cp, ok := obj.DeepCopyObject().(client.Object)
	if !ok {
		return errors.New("not a client.Object")
	}
	if err := write(cp); err != nil {
		return err
	}
	return lost
}
