package podbugger

import (
	"context"
	_ "embed"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
)

// Artifacts (spec.incidents.artifacts): the debug container of a PodBugger
// that names a volume runs collectorScript instead of spec.command, with
// that volume mounted (read-only unless it keeps copies in it). Every
// second it lists the volume's regular files; each new or changed file that
// has not changed for a second is copied (at most maxFileBytes of it, and
// maxBytes a pass) into .deckhand/<time>/ of the same volume, hashed, and
// told on the container's stdout as one line:
//
//	DECKHAND-ARTIFACT <mtime> <size> <kept> <sha256|-> <.deckhand/<time>|-> <error|-> <path>
//
// and, after every pass that collected and every second pass,
//
//	DECKHAND-ARTIFACTS-SCANNED <time>
//
// The manager reads that log (its last artifactLogBytes, through the
// pods/log API as it reads every log) after a failure and lists, in the
// failed instance's slot, the files whose mtime lies within the instance's
// life: file bytes never leave the pod, and the manager holds at most a
// bounded log tail. Only the last keep collections keep their copies.
//
//go:embed collector.sh
var collectorScript string

// artifactMountPath is where the collector sees the artifacts volume.
const artifactMountPath = "/deckhand-artifacts"

const (
	// artifactLogBytes is how much of the collector's log a read keeps:
	// at most 256 lines of up to ~400 bytes from one pass, of which only
	// those of the failed instance's life count.
	artifactLogBytes = 64 << 10
	// artifactsWait bounds how long a log job waits for the collector to
	// have scanned the volume after the failure (it scans every second,
	// and a file must be a second old to be taken).
	artifactsWait = 8 * time.Second
	// artifactSettle is how long after an instance's end the collector's
	// scan must be for every file the instance wrote to be listed: a file
	// is taken once a second old, and mtimes and finishedAt are in whole
	// seconds.
	artifactSettle = 3
)

// artifactPoll is how often a job waiting for the collector reads its log
// again; a variable for tests.
var artifactPoll = time.Second

// collectorContainer makes c, pb's debug container, the artifacts collector
// of a: its command the script, no TTY (its output is a log the manager
// parses), the volume mounted read-only unless copies are kept in it.
func collectorContainer(c *corev1.EphemeralContainer, a *policy.Artifacts) {
	c.Command = []string{"sh", "-c", collectorScript, "deckhand-artifacts", artifactMountPath,
		strconv.FormatInt(a.MaxFileBytes, 10), strconv.FormatInt(a.MaxBytes, 10), strconv.Itoa(int(a.Keep))}
	c.Args = nil
	c.Stdin, c.TTY = false, false
	c.VolumeMounts = []corev1.VolumeMount{{Name: a.Volume, MountPath: artifactMountPath, ReadOnly: a.Keep == 0}}
}

// Event reasons of artifacts.
const (
	// EventArtifactVolumeNotUsable: a pod lacks spec.incidents.artifacts.volume,
	// or it is a kind the collector does not mount (not an emptyDir, claim or
	// ephemeral volume); the pod gets no debug container.
	EventArtifactVolumeNotUsable = "ArtifactVolumeNotUsable"
)

// artifactVolumeProblem says why pod's volume name cannot be the artifacts
// volume, "" when it can: only an emptyDir, a claim or an ephemeral volume,
// never a Secret, ConfigMap, projected token or hostPath.
func artifactVolumeProblem(pod *corev1.Pod, name string) string {
	for _, v := range pod.Spec.Volumes {
		if v.Name != name {
			continue
		}
		if v.EmptyDir != nil || v.PersistentVolumeClaim != nil || v.Ephemeral != nil {
			return ""
		}
		return "its volume " + name + " (spec.incidents.artifacts.volume) is not an emptyDir, persistentVolumeClaim or ephemeral volume"
	}
	return "pod has no volume named " + name + " (spec.incidents.artifacts.volume)"
}

// artifactsRead is what the collector's log says of one failed instance.
type artifactsRead struct {
	files []debugv1beta1.IncidentArtifact
	note  string
}

// artifactLine is one DECKHAND-ARTIFACT line of the collector's log.
var artifactLine = regexp.MustCompile(`^DECKHAND-ARTIFACT ([0-9]{1,12}) ([0-9]{1,19}) ([0-9]{1,19}) ([a-f0-9]{64}|-) (\.deckhand/[0-9]{1,12}|-) (unreadable|maxBytes|notCopied|-) (.+)$`)

// scannedLine is a DECKHAND-ARTIFACTS-SCANNED line.
var scannedLine = regexp.MustCompile(`^DECKHAND-ARTIFACTS-SCANNED ([0-9]{1,12})$`)

// parseArtifacts lists, from the collector's log out, the files whose
// mtime lies within [start-1s, end+1s] (the last line of each path wins),
// at most MaxArtifactFiles of them, and the latest scan's time.
func parseArtifacts(out string, start, end time.Time, sc scrub) (files []debugv1beta1.IncidentArtifact, more int, scanned int64) {
	from, to := start.Unix()-1, end.Unix()+1
	if start.IsZero() {
		from = 0
	}
	at := map[string]int{}
	for line := range strings.SplitSeq(out, "\n") {
		line = strings.TrimSuffix(line, "\r")
		if m := scannedLine.FindStringSubmatch(line); m != nil {
			t, _ := strconv.ParseInt(m[1], 10, 64)
			scanned = max(scanned, t)
			continue
		}
		m := artifactLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		mtime, _ := strconv.ParseInt(m[1], 10, 64)
		if mtime < from || mtime > to {
			continue
		}
		size, err1 := strconv.ParseInt(m[2], 10, 64)
		kept, err2 := strconv.ParseInt(m[3], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		name := cut(m[7], 256)
		f := debugv1beta1.IncidentArtifact{Name: sc.clean(name, 256), Size: size, Truncated: kept < size}
		if m[4] != "-" {
			f.SHA256 = m[4]
		}
		if m[5] != "-" {
			f.Copy = cut(m[5]+"/"+strings.ReplaceAll(f.Name, "/", "_"), 320)
		}
		switch m[6] {
		case "unreadable":
			f.Error = "not readable by the debug container's user"
		case "maxBytes":
			f.Error = "not read: the collection's maxBytes was spent"
		case "notCopied":
			f.Error = "not copied: the volume could not be written"
		}
		if i, ok := at[f.Name]; ok {
			files[i] = f
			continue
		}
		if len(files) == debugv1beta1.MaxArtifactFiles {
			more++
			continue
		}
		at[f.Name] = len(files)
		files = append(files, f)
	}
	return files, more, scanned
}

// readArtifacts reads the collector's log until it has scanned the volume
// artifactSettle seconds after j's instance ended (or artifactsWait has
// passed), and lists the instance's files.
func (r *IncidentReconciler) readArtifacts(ctx context.Context, j logJob) artifactsRead {
	ctx, cancel := context.WithTimeout(ctx, artifactsWait)
	defer cancel()
	var (
		got     artifactsRead
		lastErr error
	)
	for {
		out, _, err := r.Logs(ctx, j.pod.Namespace, j.pod.Name, j.collector, false, artifactLogBytes)
		if err == nil {
			files, more, scanned := parseArtifacts(out, j.started.Time, j.finished.Time, j.scrub)
			got = artifactsRead{files: files}
			if more > 0 {
				got.note = fmt.Sprintf("%d more files not listed: a record lists at most %d an instance", more, debugv1beta1.MaxArtifactFiles)
			}
			if scanned >= j.finished.Unix()+artifactSettle {
				return got
			}
		}
		lastErr = err
		select {
		case <-ctx.Done():
			switch {
			case lastErr != nil:
				got.note = "not listed: the collector's log could not be read: " + cut(lastErr.Error(), 256)
			case got.note == "":
				got.note = fmt.Sprintf("the collector had not scanned the volume %d s after the failure: the list may miss files", artifactSettle)
			}
			return got
		case <-time.After(artifactPoll):
		}
	}
}
