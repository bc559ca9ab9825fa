package intern

import (
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

// Objects made after a GC share the strings of those made before it: the
// memory figures of compact objects count each repeated string once.
func TestInternSharesAcrossGCs(t *testing.T) {
	first := String(strings.Repeat("label-value-", 3))
	runtime.GC()
	runtime.GC()
	later := String(strings.Repeat("label-value-", 3))
	if unsafe.StringData(first) != unsafe.StringData(later) {
		t.Fatalf("a string interned after a GC is a new copy: shared only between two GCs")
	}
	runtime.KeepAlive(first)
}

// The table never holds more than internBytes: distinct values start it
// over rather than grow it.
func TestInternIsBounded(t *testing.T) {
	for i := range 200_000 {
		String(strings.Repeat("x", 40) + string(rune('a'+i%26)) + strings.Repeat("y", i%97) + itoa(i))
	}
	interned.mu.Lock()
	defer interned.mu.Unlock()
	if interned.bytes > internBytes {
		t.Fatalf("the intern table holds %d bytes, over its bound %d", interned.bytes, internBytes)
	}
}

func itoa(i int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		if i /= 10; i == 0 {
			return string(b)
		}
	}
}
