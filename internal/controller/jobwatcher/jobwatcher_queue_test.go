package jobwatcher

import (
	"testing"
	"time"

	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/handler"
)

func TestQueueListed(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	tests := map[string]struct {
		expiry   time.Time
		known    bool
		after    time.Duration
		priority int
	}{
		"not due yet: queued for its expiry":       {expiry: now.Add(3 * time.Second), known: true, after: 3 * time.Second, priority: normalPriority},
		"due now":                                  {expiry: now, known: true, priority: normalPriority},
		"fell due in the restart's gap":            {expiry: now.Add(-30 * time.Second), known: true, priority: normalPriority},
		"history: due a minute ago or more":        {expiry: now.Add(-recentlyDue), known: true, priority: handler.LowPriority},
		"history: due an hour ago":                 {expiry: now.Add(-time.Hour), known: true, priority: handler.LowPriority},
		"expiry unknown to the cache: judge later": {known: false, priority: handler.LowPriority},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := queueListed(tt.expiry, tt.known, now)
			if got.After != tt.after || ptr.Deref(got.Priority, 0) != tt.priority || got.Priority == nil {
				t.Errorf("queueListed = after %s, priority %v; want after %s, priority %d", got.After, got.Priority, tt.after, tt.priority)
			}
		})
	}
}
