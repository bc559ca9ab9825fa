// Package intern holds strings many cached objects repeat once (namespaces,
// label keys and values, owner references, images), within a bound.
package intern

import (
	"strings"
	"sync"
)

// String is s, held once however many objects carry it, within a bound.
//
// unique.Make alone shares a string only while its handle lives, and the
// string it returns does not keep the handle: after the next GC the next
// object of the same text got a copy of its own. So the table keeps every
// string it returns, up to internBytes of them; when they would pass that,
// it starts again empty (the objects holding the old strings keep them;
// later objects share new copies). A tenant writing distinct values (labels
// up to 63 bytes, images) fills it sooner, so sharing starts over more
// often, but the table never holds more than internBytes.
func String(s string) string {
	if s == "" {
		return ""
	}
	interned.mu.Lock()
	defer interned.mu.Unlock()
	if held, ok := interned.m[s]; ok {
		return held
	}
	cost := len(s) + internEntry
	if interned.m == nil || interned.bytes+cost > internBytes {
		interned.m, interned.bytes = make(map[string]string, 1024), 0
	}
	held := strings.Clone(s)
	interned.m[held] = held
	interned.bytes += cost
	return held
}

// internBytes bounds what String's table holds: its strings' bytes and
// their entries' (internEntry each). 4 MiB is some 30,000 label values.
const (
	internBytes = 4 << 20
	internEntry = 64
)

var interned struct {
	mu    sync.Mutex
	m     map[string]string
	bytes int
}
