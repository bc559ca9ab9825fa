package incident

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

func artifactLineFor(mtime, size, kept int64, sum, dir, name string) string {
	return fmt.Sprintf("DECKHAND-ARTIFACT %d %d %d %s %s - %s", mtime, size, kept, sum, dir, name)
}

// Only the files written in the instance's life are its own; a path's last
// line wins; lines that are not the collector's are ignored; at most
// MaxArtifactFiles are listed.
func TestParseArtifactsTakesTheInstancesFilesOnly(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	start, end := time.Unix(1000, 0), time.Unix(1010, 0)
	lines := []string{
		artifactLineFor(990, 5, 5, sum, ".deckhand/992", "old.dump"),    // the instance before
		artifactLineFor(1005, 5, 5, sum, ".deckhand/1013", "core.dump"), // its own
		artifactLineFor(1011, 9, 4, sum, ".deckhand/1013", "heap/x y"),  // its own, written as it ended; truncated
		artifactLineFor(1012, 5, 5, sum, ".deckhand/1014", "next.dump"), // the next instance's
		"DECKHAND-ARTIFACT 1005 5 5 NOTASHA .deckhand/1 - forged",       // not the collector's
		"DECKHAND-ARTIFACTS-SCANNED 1013",
	}
	files, more, scanned := parseArtifacts(strings.Join(lines, "\n"), start, end, scrub{})
	if scanned != 1013 || more != 0 || len(files) != 2 {
		t.Fatalf("files %+v, more %d, scanned %d", files, more, scanned)
	}
	if f := files[0]; f.Name != "core.dump" || f.Size != 5 || f.SHA256 != sum || f.Truncated || f.Copy != ".deckhand/1013/core.dump" {
		t.Errorf("core.dump: %+v", f)
	}
	if f := files[1]; f.Name != "heap/x y" || !f.Truncated || f.Copy != ".deckhand/1013/heap_x y" {
		t.Errorf("heap/x y: %+v", f)
	}
	many := make([]string, 0, debugv1beta1.MaxArtifactFiles+3)
	for i := range debugv1beta1.MaxArtifactFiles + 3 {
		many = append(many, artifactLineFor(1001, 1, 1, sum, "-", fmt.Sprintf("f%d", i)))
	}
	files, more, _ = parseArtifacts(strings.Join(many, "\n"), start, end, scrub{})
	if len(files) != debugv1beta1.MaxArtifactFiles || more != 3 {
		t.Errorf("%d files listed, %d more; want %d and 3", len(files), more, debugv1beta1.MaxArtifactFiles)
	}
}

// A job waits for the collector to have scanned the volume after the
// instance's end, reading its log again, within artifactsWait.
func TestReadArtifactsWaitsForTheCollectorsScan(t *testing.T) {
	defer func(p time.Duration) { artifactPoll = p }(artifactPoll)
	artifactPoll = 10 * time.Millisecond
	sum := strings.Repeat("0f", 32)
	var reads atomic.Int32
	r := &IncidentReconciler{Logs: func(_ context.Context, _, _, container string, previous bool, limit int) (string, bool, error) {
		if container != "dbg" || previous || limit != artifactLogBytes {
			return "", false, fmt.Errorf("read %s previous=%v limit %d", container, previous, limit)
		}
		switch reads.Add(1) {
		case 1:
			return "", false, fmt.Errorf(`container "dbg" is waiting to start`)
		case 2:
			return "DECKHAND-ARTIFACTS-SCANNED 1011\n", false, nil
		}
		return "DECKHAND-ARTIFACTS-SCANNED 1011\n" + artifactLineFor(1010, 3, 3, sum, "-", "core") + "\nDECKHAND-ARTIFACTS-SCANNED 1013\n", false, nil
	}}
	j := logJob{pod: types.NamespacedName{Namespace: "ns", Name: "p"}, collector: "dbg",
		started: metav1.Unix(1000, 0), finished: metav1.Unix(1010, 0)}
	got := r.readArtifacts(context.Background(), j)
	if reads.Load() != 3 || len(got.files) != 1 || got.files[0].Name != "core" || got.note != "" {
		t.Errorf("after %d reads: %+v", reads.Load(), got)
	}
}

// The collector itself (../collector.sh, which package podbugger runs as
// the debug container), run by busybox as on the real node, its log read
// as the recorder reads it: a file written a moment ago is listed once,
// with its size and SHA-256, and copied into .deckhand/<time>/ (cut to
// maxFileBytes); with keep 0 nothing is written.
func TestCollectorScriptListsHashesAndCopiesNewFiles(t *testing.T) {
	sh, err := exec.LookPath("busybox")
	if err != nil {
		t.Skip("no busybox here to run the collector with")
	}
	for _, keep := range []string{"0", "2"} {
		t.Run("keep "+keep, func(t *testing.T) { runCollector(t, sh, keep) })
	}
}

// dumpFiles writes content and big into dir as core.dump and sub/heap,
// last modified at old.
func dumpFiles(t *testing.T, dir string, content, big []byte, old time.Time) {
	t.Helper()
	for name, b := range map[string][]byte{"core.dump": content, "sub/heap": big} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, old, old); err != nil {
			t.Fatal(err)
		}
	}
}

func runCollector(t *testing.T, sh, keep string) {
	script, err := os.ReadFile(filepath.Join("..", "collector.sh"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	content := []byte("deckhand dump\n")
	big := make([]byte, 3000)
	for i := range big {
		big[i] = byte(i)
	}
	old := time.Now().Add(-5 * time.Second)
	dumpFiles(t, dir, content, big, old)
	ctx, cancel := context.WithTimeout(context.Background(), 2500*time.Millisecond)
	defer cancel()
	out, _ := exec.CommandContext(ctx, sh, "sh", "-c", string(script), "deckhand-artifacts", dir, "1024", "4096", keep).Output()
	files, _, scanned := parseArtifacts(string(out), old.Add(-time.Second), old, scrub{})
	if scanned == 0 || len(files) != 2 {
		t.Fatalf("collector said %q", out)
	}
	want := map[string]debugv1beta1.IncidentArtifact{
		"core.dump": {Name: "core.dump", Size: int64(len(content)), SHA256: sum(content)},
		"sub/heap":  {Name: "sub/heap", Size: 3000, SHA256: sum(big[:1024]), Truncated: true},
	}
	for _, f := range files {
		w := want[f.Name]
		if f.Size != w.Size || f.SHA256 != w.SHA256 || f.Truncated != w.Truncated || f.Error != "" {
			t.Errorf("listed %+v, want %+v", f, w)
		}
		if keep == "0" {
			if f.Copy != "" {
				t.Errorf("keep 0 copied %s to %s", f.Name, f.Copy)
			}
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, f.Copy))
		if err != nil || sum(b) != f.SHA256 {
			t.Errorf("%s: the copy %s does not hold what was hashed (%v)", f.Name, f.Copy, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, ".deckhand")); (keep == "0") != os.IsNotExist(err) {
		t.Errorf("keep %s: .deckhand: %v", keep, err)
	}
	if n := strings.Count(string(out), "DECKHAND-ARTIFACT "); n != 2 {
		t.Errorf("%d files told, want each once: %q", n, out)
	}
}

func sum(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
