// Package proc is what tests measure of processes and of their own heap:
// Linux's /proc (a process's memory, CPU time, parent, command) and the Go
// runtime's live heap. One reader of each, for the envtest, fault, bench,
// adversarial and e2e suites alike; it imports nothing beyond the standard
// library, so a package's unit tests can use it without envtest.
package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Self is the pid that names this process.
const Self = 0

func path(pid int, file string) string {
	if pid == Self {
		return "/proc/self/" + file
	}
	return "/proc/" + strconv.Itoa(pid) + "/" + file
}

// StatusBytes is one memory field of /proc/<pid>/status, in bytes: VmRSS
// (all resident memory), VmHWM (its peak), RssAnon (the process's own:
// heap, stacks), RssFile (its binary's pages, shared page cache).
func StatusBytes(pid int, field string) (int64, error) {
	b, err := os.ReadFile(path(pid, "status"))
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err
		}
	}
	return 0, fmt.Errorf("no %s in %s", field, path(pid, "status"))
}

// Stat is what /proc/<pid>/stat says of a process.
type Stat struct {
	// Comm is the command's name, as the kernel keeps it (15 bytes).
	Comm string
	// State is its state (R, S, D, Z, …).
	State string
	// Parent is its parent's pid.
	Parent int
	// CPU is the CPU time it has used, user and system, to the kernel's
	// tick of 10 ms (Linux's USER_HZ).
	CPU time.Duration
}

// ReadStat reads /proc/<pid>/stat; it fails when pid has ended.
func ReadStat(pid int) (Stat, error) {
	b, err := os.ReadFile(path(pid, "stat"))
	if err != nil {
		return Stat{}, err
	}
	// pid (comm) state ppid …: comm may hold spaces and parentheses.
	open, end := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if open < 0 || end < open {
		return Stat{}, fmt.Errorf("%s: no command name", path(pid, "stat"))
	}
	f := strings.Fields(string(b[end+1:]))
	if len(f) < 13 {
		return Stat{}, fmt.Errorf("short %s", path(pid, "stat"))
	}
	parent, err1 := strconv.Atoi(f[1])
	utime, err2 := strconv.ParseInt(f[11], 10, 64)
	stime, err3 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2, err3); err != nil {
		return Stat{}, fmt.Errorf("%s: %w", path(pid, "stat"), err)
	}
	return Stat{Comm: string(b[open+1 : end]), State: f[0], Parent: parent,
		CPU: time.Duration(utime+stime) * 10 * time.Millisecond}, nil
}

// Pids lists the processes running now.
func Pids() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			out = append(out, pid)
		}
	}
	return out, nil
}

// Find is the first process whose command line holds every one of parts,
// 0 when none does.
func Find(parts ...string) (int, error) {
	pids, err := Pids()
	if err != nil {
		return 0, err
	}
	for _, pid := range pids {
		cmd, err := os.ReadFile(path(pid, "cmdline"))
		if err == nil && !slices.ContainsFunc(parts, func(p string) bool { return !bytes.Contains(cmd, []byte(p)) }) {
			return pid, nil
		}
	}
	return 0, nil
}

// Children lists the processes whose parent is pid and whose command's
// name is one of names (compared as the kernel keeps it, 15 bytes).
func Children(pid int, names ...string) ([]int, error) {
	pids, err := Pids()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, child := range pids {
		st, err := ReadStat(child)
		if err != nil || st.Parent != pid {
			continue // ended meanwhile, or another's child
		}
		if slices.ContainsFunc(names, func(n string) bool { return st.Comm == n[:min(len(n), 15)] }) {
			out = append(out, child)
		}
	}
	return out, nil
}

// LiveHeap is this process's live heap bytes after a full collection.
func LiveHeap() int64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc)
}

// HeapPeak samples this process's heap (its objects, live or not yet
// collected: runtime/metrics) every 10 ms until stopped, and returns the
// peak.
func HeapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	done, ended := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(ended)
		for {
			metrics.Read(sample)
			peak = max(peak, sample[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	}()
	return func() uint64 {
		close(done)
		<-ended
		return peak
	}
}
