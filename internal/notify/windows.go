package notify

import (
	"fmt"
	"sync"
	"time"
)

// Windows turns a run of failures into two notifications: one when its
// window opens (the first failure after a quiet spell of Length) and a
// summary when it closes (Length after the last failure), whatever the
// number of failures between. A failure after the window closed opens
// another, with another key. A failure told again (a replayed event: not
// after the last one seen of its family) changes nothing. It is safe for
// concurrent use.
type Windows struct {
	// Length is the quiet spell that closes a window.
	Length time.Duration

	mu   sync.Mutex
	open map[string]*window
	// closed is, for a Length after its window closed, the last failure
	// of each family: a replay of it opens no window.
	closed map[string]time.Time
}

type window struct {
	msg Message
}

// Observe records the failure m stands for (one failure, at m.LastTime)
// under family (the pod UID, container and reason it is a failure of) and
// returns what to send now: nothing while a window is open; when the
// failure opens one, the summary of the window it ends (if Close had not
// yet) and the opening.
func (w *Windows) Observe(family string, m Message) []Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.open == nil {
		w.open, w.closed = map[string]*window{}, map[string]time.Time{}
	}
	if last, ok := w.closed[family]; ok && !m.LastTime.After(last) {
		return nil
	}
	var out []Message
	if o, ok := w.open[family]; ok {
		if !m.LastTime.After(o.msg.LastTime) {
			return nil
		}
		if m.LastTime.Sub(o.msg.LastTime) < w.Length {
			o.msg.Count++
			o.msg.LastTime = m.LastTime
			o.msg.ExitCode, o.msg.Summary, o.msg.Record = m.ExitCode, m.Summary, m.Record
			return nil
		}
		out = append(out, o.summary())
	}
	m.Type = TypeOpened
	m.FirstTime = m.LastTime
	m.Count = 1
	m.Key = fmt.Sprintf("%s/%d", family, m.LastTime.Unix())
	w.open[family] = &window{msg: m}
	delete(w.closed, family)
	return append(out, m)
}

func (o *window) summary() Message {
	s := o.msg
	s.Type, s.Key = TypeClosed, o.msg.Key+"/closed"
	return s
}

// Close returns the summaries of the windows quiet for Length at now, and
// forgets them (their last failure is kept a Length more, against replays).
func (w *Windows) Close(now time.Time) []Message {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []Message
	for family, o := range w.open {
		if now.Sub(o.msg.LastTime) >= w.Length {
			out = append(out, o.summary())
			delete(w.open, family)
			w.closed[family] = o.msg.LastTime
		}
	}
	for family, last := range w.closed {
		if now.Sub(last) >= 2*w.Length {
			delete(w.closed, family)
		}
	}
	return out
}

// Forget drops the window of family without a summary (its pod is gone and
// its record with it).
func (w *Windows) Forget(family string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.open, family)
	delete(w.closed, family)
}

// Len is how many windows are open.
func (w *Windows) Len() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.open)
}
