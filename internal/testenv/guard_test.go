package testenv

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/deckhand-dev/deckhand/internal/testenv/proc"
)

// guardChildEnv makes TestGuardChild run: it is the test binary that panics.
const guardChildEnv = "DECKHAND_TESTENV_GUARD_CHILD"

// TestGuardChild starts a control plane, says what its guard watches, and
// panics, as a failing test binary does: it never reaches Env.Stop. Only
// TestTheControlPlaneEndsWithATestBinaryThatPanics runs it.
func TestGuardChild(t *testing.T) {
	if os.Getenv(guardChildEnv) == "" {
		t.Skip("the child of TestTheControlPlaneEndsWithATestBinaryThatPanics")
	}
	e, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Printf("guarded pids=%s dirs=%s\n", strings.Trim(fmt.Sprint(e.guard.pids), "[]"), strings.Join(e.guard.dirs, " "))
	panic("a test binary that panics never reaches Env.Stop")
}

// A test binary that panics (or is killed, or runs out its -timeout) must
// not leave etcd and kube-apiserver running: they are stopped, and their
// directories removed, when it ends.
func TestTheControlPlaneEndsWithATestBinaryThatPanics(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^TestGuardChild$", "-test.count=1")
	cmd.Env = append(os.Environ(), guardChildEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the child did not panic:\n%s", out)
	}
	pids, dirs := guarded(t, out)
	// Whatever the outcome, this test leaves nothing behind.
	t.Cleanup(func() {
		for _, p := range pids {
			_ = syscall.Kill(-p, syscall.SIGKILL)
		}
		for _, d := range dirs {
			_ = os.RemoveAll(d)
		}
	})
	var left []string
	deadline := time.Now().Add(20 * time.Second)
	for {
		left = left[:0]
		for _, p := range pids {
			if alive(p) {
				left = append(left, "process "+strconv.Itoa(p))
			}
		}
		for _, d := range dirs {
			if _, err := os.Stat(d); !errors.Is(err, os.ErrNotExist) {
				left = append(left, "directory "+d)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(left) > 0 {
		t.Errorf("20 s after the test binary panicked, its control plane's %s remain", strings.Join(left, ", "))
	}
}

// guarded reads the child's "guarded pids=… dirs=…" line.
func guarded(t *testing.T, out []byte) (pids []int, dirs []string) {
	t.Helper()
	s := bufio.NewScanner(bytes.NewReader(out))
	s.Buffer(nil, 1<<20)
	for s.Scan() {
		line, ok := strings.CutPrefix(s.Text(), "guarded pids=")
		if !ok {
			continue
		}
		ids, dirList, _ := strings.Cut(line, " dirs=")
		for _, id := range strings.Fields(ids) {
			p, err := strconv.Atoi(id)
			if err != nil {
				t.Fatalf("bad pid %q in %q", id, s.Text())
			}
			pids = append(pids, p)
		}
		dirs = strings.Fields(dirList)
	}
	if len(pids) != 2 || len(dirs) != 2 {
		t.Fatalf("the child did not say which two processes and directories its guard watches:\n%s", out)
	}
	return pids, dirs
}

// alive reports whether pid runs (a zombie, ended but not yet reaped, does
// not).
func alive(pid int) bool {
	st, err := proc.ReadStat(pid)
	return err == nil && st.State != "Z"
}
