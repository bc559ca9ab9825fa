package incident

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
	"github.com/deckhand-dev/deckhand/internal/redact"
)

// maxScrubs bounds the PodBuggers whose compiled patterns the recorder
// keeps; past it, it forgets them all and compiles again as they record.
const maxScrubs = 1024

// scrubs keeps each PodBugger's scrub, compiled once per generation of its
// spec (a few patterns compile in well under a millisecond, but a crash
// storm records hundreds of failures a second).
type scrubs struct {
	mu    sync.Mutex
	byUID map[types.UID]scrubbing
}

type scrubbing struct {
	generation int64
	scrub      scrub
}

// of is pb's scrub.
func (m *scrubs) of(pb *debugv1beta1.PodBugger) scrub {
	if pb.Spec.Incidents == nil || len(pb.Spec.Incidents.Redact) == 0 {
		return scrub{}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if s, ok := m.byUID[pb.UID]; ok && s.generation == pb.Generation {
		return s.scrub
	}
	patterns, errs := policy.RedactPatterns(pb)
	sc := scrub{r: redact.New(patterns, nil)}
	if len(errs) > 0 {
		sc = scrub{unusable: errs[0].Field}
	}
	if len(m.byUID) >= maxScrubs {
		clear(m.byUID)
	}
	m.byUID[pb.UID] = scrubbing{generation: pb.Generation, scrub: sc}
	return sc
}
