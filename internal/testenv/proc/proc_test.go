package proc

import (
	"os"
	"os/exec"
	"runtime"
	"slices"
	"testing"
	"time"
)

// What the readers say of this process and of a child it starts.
func TestReadersSeeThisProcessAndItsChild(t *testing.T) {
	rss, err := StatusBytes(Self, "VmRSS")
	if err != nil || rss < 1<<20 {
		t.Errorf("VmRSS of this process: %d, %v", rss, err)
	}
	if _, err := StatusBytes(Self, "NoSuchField"); err == nil {
		t.Error("a field /proc/self/status lacks was read")
	}
	before, err := ReadStat(Self)
	if err != nil || before.Parent != os.Getppid() || before.State != "R" {
		t.Fatalf("this process's stat: %+v, %v (parent %d)", before, err, os.Getppid())
	}
	for start := time.Now(); time.Since(start) < 150*time.Millisecond; {
	}
	if after, _ := ReadStat(Self); after.CPU <= before.CPU {
		t.Errorf("150 ms of spinning used no CPU time: %v, then %v", before.CPU, after.CPU)
	}

	child := exec.Command("sleep", "30.25")
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = child.Process.Kill(); _ = child.Wait() })
	if kids, err := Children(os.Getpid(), "sleep"); err != nil || !slices.Contains(kids, child.Process.Pid) {
		t.Errorf("children named sleep: %v, %v, want %d among them", kids, err, child.Process.Pid)
	}
	if kids, _ := Children(os.Getpid(), "other"); slices.Contains(kids, child.Process.Pid) {
		t.Error("a child was found by another name")
	}
	if pid, err := Find("sleep", "30.25"); err != nil || pid != child.Process.Pid {
		t.Errorf("Find: %d, %v, want %d", pid, err, child.Process.Pid)
	}
	if pid, _ := Find("sleep", "no such argument"); pid != 0 {
		t.Errorf("Find of no process: %d", pid)
	}
}

// LiveHeap counts what is held, HeapPeak what was allocated at once.
func TestHeapReadersSeeWhatIsHeld(t *testing.T) {
	stop := HeapPeak()
	before := LiveHeap()
	held := make([]byte, 64<<20)
	for i := range held {
		held[i] = 1
	}
	if grown := LiveHeap() - before; grown < 60<<20 {
		t.Errorf("holding 64 MiB grew the live heap by %d", grown)
	}
	time.Sleep(30 * time.Millisecond)
	runtime.KeepAlive(held)
	if peak := stop(); peak < 64<<20 {
		t.Errorf("peak heap %d while 64 MiB were held", peak)
	}
}
