package podbugger

import (
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

func artifactsPB(keep int32) *debugv1beta1.PodBugger {
	return &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Name: "dbg"}, Spec: debugv1beta1.PodBuggerSpec{
		Image: "busybox:1.37", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Triggers: []debugv1beta1.Trigger{debugv1beta1.TriggerError}, MaxPods: 10,
		Incidents: &debugv1beta1.IncidentPolicy{Inject: true, Artifacts: &debugv1beta1.IncidentArtifacts{
			Volume: "dumps", MaxFileBytes: ptr.To[int64](1024), MaxBytes: ptr.To[int64](4096), Keep: ptr.To(keep)}},
	}}
}

// The debug container of a PodBugger with artifacts is the collector: the
// volume mounted (read-only when it keeps no copies), no TTY (its output
// is parsed), the bounds passed, the profile's securityContext unchanged.
func TestTheCollectorMountsTheArtifactVolumeOnly(t *testing.T) {
	for _, keep := range []int32{0, 2} {
		c := debugContainer(artifactsPB(keep))
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].Name != "dumps" || c.VolumeMounts[0].MountPath != artifactMountPath ||
			c.VolumeMounts[0].ReadOnly != (keep == 0) {
			t.Errorf("keep %d: volumeMounts = %+v, want dumps at %s, read-only %v", keep, c.VolumeMounts, artifactMountPath, keep == 0)
		}
		if len(c.Command) != 8 || c.Command[0] != "sh" || c.Command[2] != collectorScript ||
			strings.Join(c.Command[4:], " ") != fmt.Sprintf("%s 1024 4096 %d", artifactMountPath, keep) || c.Args != nil {
			t.Errorf("keep %d: command = %q, args %q", keep, c.Command[3:], c.Args)
		}
		if c.TTY || c.Stdin {
			t.Errorf("keep %d: the collector has a TTY or stdin: its log would not parse", keep)
		}
		if sc := c.SecurityContext; sc == nil || sc.Privileged == nil || *sc.Privileged || sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot {
			t.Errorf("keep %d: securityContext %+v is not the restricted profile's", keep, sc)
		}
	}
	// Without artifacts nothing is mounted.
	pb := artifactsPB(1)
	pb.Spec.Incidents.Artifacts = nil
	if c := debugContainer(pb); c.VolumeMounts != nil || !c.TTY {
		t.Errorf("without artifacts: %+v", c)
	}
}

// A pod without the volume, or whose volume of that name is a Secret or a
// hostPath, is skipped: the collector never mounts them.
func TestOnlyAnEmptyDirClaimOrEphemeralVolumeHoldsArtifacts(t *testing.T) {
	tests := map[string]struct {
		v    corev1.VolumeSource
		want string
	}{
		"emptyDir":  {corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}, ""},
		"claim":     {corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}}, ""},
		"ephemeral": {corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}, ""},
		"secret":    {corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}, "is not an emptyDir"},
		"hostPath":  {corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}, "is not an emptyDir"},
		"projected": {corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{}}, "is not an emptyDir"},
	}
	for name, tt := range tests {
		pod := &corev1.Pod{Spec: corev1.PodSpec{Volumes: []corev1.Volume{{Name: "other", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "dumps", VolumeSource: tt.v}}}}
		if got := artifactVolumeProblem(pod, "dumps"); (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", name, got, tt.want)
		}
	}
	if got := artifactVolumeProblem(&corev1.Pod{}, "dumps"); !strings.Contains(got, "pod has no volume named dumps") {
		t.Errorf("no volume: %q", got)
	}
}
