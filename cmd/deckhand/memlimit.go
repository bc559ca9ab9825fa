package main

import (
	"errors"
	"io/fs"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// cgroupMemoryFiles hold the container's memory limit: cgroup v2's, then
// v1's.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// memoryLimitShare is the part of the container's memory limit the Go
// runtime aims to stay under: the rest is for what it does not count
// (stacks of the OS threads, the binary's text) and for a spike between two
// collections.
const memoryLimitShare = 0.9

// setMemoryLimit sets the Go runtime's soft memory limit (GOMEMLIMIT) from
// the container's memory limit, unless GOMEMLIMIT is set or there is no
// limit. Without it the heap may grow to twice what is live before a
// collection (GOGC=100), and a manager at half its limit in live objects is
// OOM-killed instead of collecting harder. It returns the limit set, 0 for
// none.
func setMemoryLimit(files []string) (int64, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	for _, f := range files {
		raw, err := os.ReadFile(f) //nolint:gosec // the cgroup files above, not input
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, err
		}
		s := strings.TrimSpace(string(raw))
		if s == "max" {
			return 0, nil
		}
		limit, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, err
		}
		// cgroup v1 says "no limit" with a number near the largest int64.
		if limit <= 0 || limit >= 1<<60 {
			return 0, nil
		}
		soft := int64(float64(limit) * memoryLimitShare)
		debug.SetMemoryLimit(soft)
		return soft, nil
	}
	return 0, nil
}
