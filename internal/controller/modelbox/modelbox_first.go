package modelbox

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
)

// firstStatus holds back the first status of a new ModelBox for up to
// statusInterval after this manager created its children, unless it is
// one a user waits on (Available or Degraded True).
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
type firstStatus struct {
	mu   sync.Mutex
	made map[types.NamespacedName]time.Time
}

func newFirstStatus() *firstStatus {
	return &firstStatus{made: map[types.NamespacedName]time.Time{}}
}

// created records that the children of the ModelBox key names, which has
// no status yet, were created at now; a later creation keeps the first.
func (f *firstStatus) created(key types.NamespacedName, now time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.made[key]; !ok {
		f.made[key] = now
	}
}

// wait is how long the first status want of the ModelBox key names is
// still held back at now; zero when it is due, and then it is no longer
// held.
func (f *firstStatus) wait(key types.NamespacedName, now time.Time, want *modelv1.ModelBoxStatus) time.Duration {
	f.mu.Lock()
	defer f.mu.Unlock()
	at, ok := f.made[key]
	if !ok {
		return 0
	}
	if left := at.Add(statusInterval).Sub(now); left > 0 && !waitedOn(want) {
		return left
	}
	delete(f.made, key)
	return 0
}

// done forgets the ModelBox key names.
func (f *firstStatus) done(key types.NamespacedName) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.made, key)
}

// waitedOn says whether a status says what a user waits on: Available or
// Degraded (and with it Stalled) True.
func waitedOn(st *modelv1.ModelBoxStatus) bool {
	return meta.IsStatusConditionTrue(st.Conditions, modelv1.ConditionAvailable) ||
		meta.IsStatusConditionTrue(st.Conditions, modelv1.ConditionDegraded)
}
