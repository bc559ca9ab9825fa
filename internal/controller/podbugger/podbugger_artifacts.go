package podbugger

import (
	_ "embed"
	"strconv"

	corev1 "k8s.io/api/core/v1"

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
// The incident recorder reads that log (its last artifactLogBytes, through
// the pods/log API as it reads every log: incident/artifacts.go) after a
// failure and lists, in the failed instance's slot, the files whose mtime
// lies within the instance's life: file bytes never leave the pod, and the
// manager holds at most a bounded log tail. Only the last keep collections
// keep their copies.
//
//go:embed collector.sh
var collectorScript string

// artifactMountPath is where the collector sees the artifacts volume.
const artifactMountPath = "/deckhand-artifacts"

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
