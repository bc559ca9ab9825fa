package policy

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

func TestHostAccess(t *testing.T) {
	adds := func(caps ...corev1.Capability) corev1.PodSpec {
		return corev1.PodSpec{Containers: []corev1.Container{{Name: "app",
			SecurityContext: &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: caps}}}}}
	}
	claimed := corev1.PodSpec{Volumes: []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{
		PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "data"}}}}}
	pv := func(name string, src corev1.PersistentVolumeSource) map[string]*corev1.PersistentVolume {
		return map[string]*corev1.PersistentVolume{"data": {ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PersistentVolumeSpec{PersistentVolumeSource: src}}}
	}
	tests := map[string]struct {
		spec    corev1.PodSpec
		profile debugv1beta1.Profile
		claimed map[string]*corev1.PersistentVolume
		want    []string
	}{
		"an ordinary pod":                       {spec: adds()},
		"SYS_ADMIN under the general profile":   {spec: adds("SYS_ADMIN"), profile: debugv1beta1.ProfileGeneral, want: []string{"capabilities added to container app (SYS_ADMIN), which the general profile's SYS_PTRACE can act with"}},
		"ALL and cap_net_admin, as written":     {spec: adds("ALL", "cap_net_admin", "CHOWN"), profile: debugv1beta1.ProfileGeneral, want: []string{"capabilities added to container app (ALL, cap_net_admin), which the general profile's SYS_PTRACE can act with"}},
		"SYS_ADMIN under the baseline profile":  {spec: adds("SYS_ADMIN"), profile: debugv1beta1.ProfileBaseline},
		"SYS_ADMIN under the restricted one":    {spec: adds("SYS_ADMIN"), profile: debugv1beta1.ProfileRestricted},
		"the baseline's own capabilities":       {spec: adds("NET_BIND_SERVICE", "CAP_KILL", "SETUID"), profile: debugv1beta1.ProfileGeneral},
		"a claim bound to a hostPath volume":    {spec: claimed, claimed: pv("pv-root", corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}), want: []string{"volume data bound to hostPath PersistentVolume pv-root"}},
		"a claim bound to a local volume":       {spec: claimed, claimed: pv("pv-disk", corev1.PersistentVolumeSource{Local: &corev1.LocalVolumeSource{Path: "/mnt/disk"}}), want: []string{"volume data bound to local PersistentVolume pv-disk"}},
		"a claim bound to a network volume":     {spec: claimed, claimed: pv("pv-nfs", corev1.PersistentVolumeSource{NFS: &corev1.NFSVolumeSource{Server: "nfs", Path: "/"}})},
		"a claim whose volume was not read yet": {spec: claimed},
		"a privileged container": {spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}},
			{Name: "side"}, {Name: "plain", SecurityContext: &corev1.SecurityContext{}}}}, want: []string{"privileged container app"}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := HostAccess(&corev1.Pod{Spec: tt.spec}, tt.profile, tt.claimed)
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("HostAccess = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestClaimedVolumes(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web-1"}, Spec: corev1.PodSpec{Volumes: []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "web-data"}}},
		{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}},
		{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
	}}}
	want := map[string]string{"data": "web-data", "scratch": "web-1-scratch"}
	if got := ClaimedVolumes(pod); !reflect.DeepEqual(got, want) {
		t.Errorf("ClaimedVolumes = %v, want %v", got, want)
	}
	if got := ClaimedVolumes(&corev1.Pod{}); got != nil {
		t.Errorf("a pod without claims: %v", got)
	}
}
