package faultinject

import (
	"context"

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
