package status

import "github.com/deckhand-dev/deckhand/internal/eventnote"

// MaxMessage bounds a condition's message, in bytes. The CRDs allow 32,768
// bytes, and a status write with a longer one fails whole (PodSet's
// slow-start brake reads that status); a message built from a tenant's
// errors or lists is cut, with a marker, well below that.
const MaxMessage = 4096

// Message returns msg cut to MaxMessage bytes, with a marker saying how much
// was cut. SetCondition applies it to every condition.
func Message(msg string) string { return eventnote.Truncate(msg, MaxMessage) }
