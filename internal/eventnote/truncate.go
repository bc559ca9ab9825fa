package eventnote

import (
	"fmt"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/recorder"
)

// MaxNote bounds an Event's note, in bytes: the apiserver refuses an
// events.k8s.io/v1 Event whose note is over 1 KiB, and the Event is lost.
const MaxNote = 1000

const cutMarker = " …[%d bytes cut]"

// Truncate returns s if it is at most limit bytes long; otherwise its
// beginning, cut on a character boundary, and a marker saying how much was
// cut, in limit bytes at most.
func Truncate(s string, limit int) string {
	if len(s) <= limit {
		return s
	}
	// The marker is never longer than with all of s cut.
	cut := max(limit-len(fmt.Sprintf(cutMarker, len(s))), 0)
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	marker := fmt.Sprintf(cutMarker, len(s)-cut)
	return s[:cut] + marker
}

// Recorder wraps an Event recorder so that every note fits in MaxNote
// bytes: a note built from an error or a list of names could otherwise
// exceed what the apiserver takes, and the Event would be lost.
func Recorder(r recorder.EventRecorder) recorder.EventRecorder { return bounded{r} }

type bounded struct{ recorder.EventRecorder }

func (b bounded) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	b.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", Truncate(fmt.Sprintf(note, args...), MaxNote))
}

func (b bounded) AnnotatedEventf(regarding, related runtime.Object, annotations map[string]string, eventtype, reason, action, note string, args ...any) {
	b.EventRecorder.AnnotatedEventf(regarding, related, annotations, eventtype, reason, action, "%s", Truncate(fmt.Sprintf(note, args...), MaxNote))
}
