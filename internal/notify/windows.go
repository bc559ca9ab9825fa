package notify

import (
	"fmt"
	"time"
)

// Windows turns a run of failures into two notifications: one when its
// window opens (the first failure after a quiet spell of Length) and a
// summary when it closes (Length after the last failure), whatever the
// number of failures between. A failure after the window closed opens
// another, with another key.
type Windows struct {
	// Length is the quiet spell that closes a window.
	Length time.Duration
	open   map[string]*window
}

type window struct {
	msg Message
}

// Observe records the failure m stands for under family (the pod UID,
// container and reason it is a failure of) and returns what to send now:
// nothing while a window is open; when the failure opens one, the summary
// of the window it ends (if Close had not yet) and the opening.
func (w *Windows) Observe(family string, m Message) []Message {
	if w.open == nil {
		w.open = map[string]*window{}
	}
	var out []Message
	if o, ok := w.open[family]; ok {
		if m.LastTime.Sub(o.msg.LastTime) < w.Length {
			o.msg.Count += max(m.Count, 1)
			o.msg.LastTime = m.LastTime
			o.msg.ExitCode, o.msg.Summary, o.msg.Record = m.ExitCode, m.Summary, m.Record
			return nil
		}
		out = append(out, o.summary())
	}
	m.Type = TypeOpened
	m.FirstTime = m.LastTime
	m.Count = max(m.Count, 1)
	m.Key = fmt.Sprintf("%s/%d", family, m.LastTime.Unix())
	w.open[family] = &window{msg: m}
	return append(out, m)
}

func (o *window) summary() Message {
	s := o.msg
	s.Type, s.Key = TypeClosed, o.msg.Key+"/closed"
	return s
}

// Close returns the summaries of the windows quiet for Length at now, and
// forgets them.
func (w *Windows) Close(now time.Time) []Message {
	var out []Message
	for family, o := range w.open {
		if now.Sub(o.msg.LastTime) >= w.Length {
			out = append(out, o.summary())
			delete(w.open, family)
		}
	}
	return out
}

// Forget drops the window of family without a summary (its pod is gone and
// its record with it).
func (w *Windows) Forget(family string) { delete(w.open, family) }

// Len is how many windows are open.
func (w *Windows) Len() int { return len(w.open) }
