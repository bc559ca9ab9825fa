package eventnote

import (
	"strings"
	"testing"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
)

func TestTruncate(t *testing.T) {
	tests := map[string]struct {
		s     string
		limit int
		want  string
	}{
		"short stays":      {"pod a failed", 100, "pod a failed"},
		"at the limit":     {strings.Repeat("x", 20), 20, strings.Repeat("x", 20)},
		"cut, with marker": {strings.Repeat("x", 100), 40, strings.Repeat("x", 21) + " …[79 bytes cut]"},
		"cut on a character boundary": {strings.Repeat("é", 50), 40,
			strings.Repeat("é", 10) + " …[80 bytes cut]"},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := Truncate(tt.s, tt.limit)
			if got != tt.want {
				t.Errorf("Truncate = %q, want %q", got, tt.want)
			}
			if len(got) > tt.limit || !utf8.ValidString(got) {
				t.Errorf("Truncate = %q: %d bytes (limit %d), valid UTF-8 %v", got, len(got), tt.limit, utf8.ValidString(got))
			}
		})
	}
}

func FuzzTruncate(f *testing.F) {
	f.Add("héllo wörld", 7)
	f.Fuzz(func(t *testing.T, s string, limit int) {
		limit = 20 + limit%2000
		if limit < 20 {
			limit += 2000
		}
		got := Truncate(s, limit)
		if len(got) > limit {
			t.Fatalf("Truncate(%q, %d) = %d bytes", s, limit, len(got))
		}
		if utf8.ValidString(s) && !utf8.ValidString(got) {
			t.Fatalf("Truncate(%q, %d) = %q: not UTF-8", s, limit, got)
		}
		if len(s) <= limit && got != s {
			t.Fatalf("Truncate(%q, %d) changed a short string", s, limit)
		}
	})
}

// TestRecorderBoundsEveryNote: a note built from a long error or list
// reaches the apiserver within MaxNote bytes, formatted as asked.
func TestRecorderBoundsEveryNote(t *testing.T) {
	fake := events.NewFakeRecorder(2)
	r := Recorder(fake)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	r.Eventf(pod, nil, corev1.EventTypeWarning, "Failed", "Create", "creating pod: %s", strings.Repeat("quota exceeded; ", 500))
	r.Eventf(pod, nil, corev1.EventTypeNormal, "Created", "Create", "created %d pods", 3)
	long, short := <-fake.Events, <-fake.Events
	if note := strings.TrimPrefix(long, "Warning Failed "); len(note) > MaxNote || !strings.HasPrefix(note, "creating pod: quota exceeded; ") || !strings.Contains(note, "bytes cut]") {
		t.Errorf("long note (%d bytes): %q", len(note), note)
	}
	if short != "Normal Created created 3 pods" {
		t.Errorf("short note: %q", short)
	}
}
