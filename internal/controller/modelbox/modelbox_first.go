package modelbox

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
)

// The first status of a new ModelBox is held back (r.first, a
// pace.Holds) for up to statusInterval after this manager created its
// children, unless it is one a user waits on (Available or Degraded True).
//
// Written at once, that first status only says "0 of N pods available",
// and when the rollout ends within the second (as it does for most
// ModelBoxes the bench makes) a second write follows, saying Available:
// two status patches per ModelBox where one says all. Held, a rollout
// that ends within the second costs one write; a longer one is written
// at the end of the second with the counts it has reached (which pacing
// would have written then anyway), so no ModelBox goes without a status
// for longer than a paced count does. The Event "Created Deployment and
// Service" still tells at once that the children were made.
//
// Only a ModelBox with no status yet is held (a child recreated under an
// older status is written at once), and only after this manager created
// its children: memory only, so a restarted manager writes at once.

// waitedOn says whether a status says what a user waits on: Available or
// Degraded (and with it Stalled) True.
func waitedOn(st *modelv1.ModelBoxStatus) bool {
	return meta.IsStatusConditionTrue(st.Conditions, modelv1.ConditionAvailable) ||
		meta.IsStatusConditionTrue(st.Conditions, modelv1.ConditionDegraded)
}

// madeChildren remembers, for statusInterval, the children this manager
// has just created, so that a pass the cache has not caught up with (the
// Deployment's creation event brings one before the Service is cached)
// knows the missing child is its own without reading it past the cache:
// that read (checkUnowned) costs a GET per pass, 0.7 to 0.8 more per new
// ModelBox than the one before the creation. After statusInterval, or once
// the cache shows the child, the read is made again as before, so a child
// replaced by someone else's object of its name is still told apart.
type madeChildren struct {
	mu   sync.Mutex
	made map[verifiedKey]time.Time
}

func newMadeChildren() *madeChildren {
	return &madeChildren{made: map[verifiedKey]time.Time{}}
}

// record notes that this manager created child at now.
func (m *madeChildren) record(child verifiedKey, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.made[child] = now
}

// recent says whether this manager created child less than statusInterval
// before now; a record that old is dropped.
func (m *madeChildren) recent(child verifiedKey, now time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.made[child]
	if ok && now.Sub(at) < statusInterval {
		return true
	}
	delete(m.made, child)
	return false
}

// drop forgets child: the cache shows it, or it was deleted.
func (m *madeChildren) drop(child verifiedKey) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.made, child)
}

// forget drops every child of the ModelBox box names, which is gone.
func (m *madeChildren) forget(box types.NamespacedName) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for key := range m.made {
		if key.box == box {
			delete(m.made, key)
		}
	}
}
