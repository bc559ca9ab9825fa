package incident

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// unansweredPause is how long the recorder first reads no log from a node
// whose kubelet did not answer one: a node that is down (or simulated, as
// kwok's are) would otherwise hold every capture of its pods for
// logsTimeout, and the recorder's workers with them, while the pods of
// healthy nodes wait. Each further silence doubles the pause, up to
// maxUnansweredPause: with a hundred silent nodes, pauses of a fixed 30 s
// kept all 8 workers waiting out timeouts (the bench's crash loop on 100 kwok
// nodes counted 214 of 2,000 failures with them, all of 800 on 20 nodes).
const (
	unansweredPause    = 30 * time.Second
	maxUnansweredPause = 10 * time.Minute
)

// unansweredNodes are the nodes whose kubelets did not answer their last
// log read, by namespace: until when the node's logs of that namespace are
// not read and the pause that set it. A pause is per (node, namespace), not
// per node: whether a read is answered in time also depends on the pod (a
// log a tenant makes huge or slow to serve), and a tenant's reads timing
// out on a node must not stop another tenant's reads there that succeed. A
// node that is really down costs each namespace with pods on it one
// logsTimeout per pause instead of one in all. It holds at most one entry
// per node and namespace with failing pods: an answer drops it, and so does
// a pause long over.
type unansweredNodes struct {
	mu    sync.Mutex
	until map[nodeOfNamespace]silence
}

// nodeOfNamespace is a node as the reads of one namespace see it.
type nodeOfNamespace struct{ node, namespace string }

type silence struct {
	until time.Time
	pause time.Duration
}

// paused reports whether logs of namespace ns on node are not to be read
// at now, and until when.
func (u *unansweredNodes) paused(node, ns string, now time.Time) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	s, ok := u.until[nodeOfNamespace{node, ns}]
	return s.until, ok && now.Before(s.until)
}

// observe notes the outcome of a log read of namespace ns from node at
// now: an error that is not the kubelet's (or the apiserver's) answer — a
// timeout, a refused connection, a proxy error — pauses the node's log
// reads of ns, twice as long as the last time if that pause ended lately.
// An answer, even a refusal ("previous terminated container not found"),
// ends the pauses of the node for ns.
func (u *unansweredNodes) observe(node, ns string, err error, now time.Time) {
	if node == "" {
		return
	}
	key := nodeOfNamespace{node, ns}
	u.mu.Lock()
	defer u.mu.Unlock()
	if err == nil || answered(err) {
		delete(u.until, key)
		return
	}
	for n, s := range u.until {
		if now.Sub(s.until) > maxUnansweredPause {
			delete(u.until, n)
		}
	}
	pause := unansweredPause
	if last, ok := u.until[key]; ok {
		pause = min(2*last.pause, maxUnansweredPause)
	}
	u.until[key] = silence{until: now.Add(pause), pause: pause}
}

// answered reports whether err is an answer to the request rather than the
// lack of one: an API status below 500.
func answered(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return false
	}
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Code > 0 && status.Status().Code < 500
}

// pausedNote is what a record says of a log not read from a paused node.
func pausedNote(node string, until time.Time) string {
	return fmt.Sprintf("not read: the kubelet of node %s did not answer a log read of this namespace lately; its logs of this namespace are read again from %s",
		node, until.UTC().Format(time.RFC3339))
}
