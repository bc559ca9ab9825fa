package scopedcache

import "time"

// SetKeepFor shortens how long an unneeded namespace's informer lives, for
// the length of a test.
func SetKeepFor(d time.Duration) (restore func()) {
	old := keepFor
	keepFor = d
	return func() { keepFor = old }
}
