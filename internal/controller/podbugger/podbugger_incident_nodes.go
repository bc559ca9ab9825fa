package podbugger

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// unansweredPause is how long the recorder reads no log from a node whose
// kubelet did not answer one: a node that is down (or simulated, as kwok's
// are) would otherwise hold every capture of its pods for logsTimeout, and
// the recorder's workers with them, while the pods of healthy nodes wait.
const unansweredPause = 30 * time.Second

// unansweredNodes are the nodes whose kubelets did not answer a log read
// lately, until when their logs are not read. It holds at most one entry
// per node of the cluster, each dropped once its pause is over.
type unansweredNodes struct {
	mu    sync.Mutex
	until map[string]time.Time
}

// paused reports whether logs of node are not to be read at now, and until
// when.
func (u *unansweredNodes) paused(node string, now time.Time) (time.Time, bool) {
	u.mu.Lock()
	defer u.mu.Unlock()
	until, ok := u.until[node]
	if ok && !now.Before(until) {
		delete(u.until, node)
		return time.Time{}, false
	}
	return until, ok
}

// observe notes the outcome of a log read from node at now: an error that
// is not the kubelet's (or the apiserver's) answer — a timeout, a refused
// connection, a proxy error — pauses the node's log reads. An answer, even
// a refusal ("previous terminated container not found"), does not.
func (u *unansweredNodes) observe(node string, err error, now time.Time) {
	if err == nil || node == "" || answered(err) {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	for n, until := range u.until {
		if !now.Before(until) {
			delete(u.until, n)
		}
	}
	u.until[node] = now.Add(unansweredPause)
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
	return fmt.Sprintf("not read: the kubelet of node %s did not answer a log read lately; its logs are read again from %s",
		node, until.UTC().Format(time.RFC3339))
}
