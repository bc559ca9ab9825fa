package testenv

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"

	"github.com/deckhand-dev/deckhand/internal/testenv/proc"
)

// A test binary that panics, is killed, or runs out its -timeout never gets
// to Env.Stop, and envtest starts etcd and kube-apiserver in process groups
// of their own (so a Ctrl-C does not reach them either): they would run on,
// orphaned, with their data in the temporary directory. A guard is a small
// shell, in a session of its own, that reads a pipe whose only writer is
// the test binary: when the binary ends without saying "done" (the pipe
// closes with it, however it ends) the guard kills the control plane's
// processes and removes their directories.
type guard struct {
	pids []int
	dirs []string
	w    *os.File // the pipe's writing end: open while the test binary lives
	cmd  *exec.Cmd
}

// guardScript kills the process groups of $PIDS and removes $DIRS unless
// the first line it reads is "done".
const guardScript = `read -r line || true
[ "$line" = done ] && exit 0
for p in $PIDS; do kill -KILL -- "-$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null; done
for d in $DIRS; do rm -rf -- "$d"; done`

// startGuard starts a guard over this process's children named one of
// names (the control plane's processes) and dirs.
func startGuard(names []string, dirs []string) (*guard, error) {
	pids, err := proc.Children(os.Getpid(), names...)
	if err != nil {
		return nil, err
	}
	if len(pids) != len(names) {
		return nil, fmt.Errorf("guarding the control plane: found %d of the processes %v among this process's children", len(pids), names)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	// The guard holds the reading end; this process only writes.
	defer func() { _ = r.Close() }()
	ids := make([]string, len(pids))
	for i, p := range pids {
		ids[i] = strconv.Itoa(p)
	}
	cmd := exec.Command("/bin/sh", "-c", guardScript)
	cmd.Stdin = r
	cmd.Env = []string{"PATH=/usr/bin:/bin", "PIDS=" + strings.Join(ids, " "), "DIRS=" + strings.Join(dirs, " ")}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, errors.Join(fmt.Errorf("starting the control plane's guard: %w", err), w.Close())
	}
	return &guard{pids: pids, dirs: dirs, w: w, cmd: cmd}, nil
}

// release tells the guard that the control plane was stopped as it should
// be, and waits for it to end.
func (g *guard) release() error {
	_, err := g.w.WriteString("done\n")
	return errors.Join(err, g.w.Close(), g.cmd.Wait())
}
