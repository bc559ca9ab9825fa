package incident

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

// Reading what the artifacts collector (spec.incidents.artifacts) told on
// its log: podbugger_artifacts.go in package podbugger runs it as the
// PodBugger's debug container and says what its lines are.

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
