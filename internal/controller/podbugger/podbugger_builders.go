package podbugger

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
)

// debugContainer is the ephemeral container pb adds to a pod. Its image is
// the reference the allow-list approved, in full (policy.NormalizeImage):
// "busybox:1.36" is injected as "docker.io/library/busybox:1.36", so that a
// runtime configured with unqualified-search registries (CRI-O, Podman's
// registries.conf) cannot pull a short name from a registry the allow-list
// never named.
func debugContainer(pb *debugv1beta1.PodBugger) corev1.EphemeralContainer {
	image, ok := policy.NormalizeImage(pb.Spec.Image)
	if !ok {
		image = pb.Spec.Image // not a reference: refused before any injection
	}
	c := corev1.EphemeralContainer{
		EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name:    policy.ContainerName(pb.Name),
			Image:   image,
			Command: pb.Spec.Command,
			Args:    pb.Spec.Args,
			// Open stdin and a TTY, as `kubectl debug -it` does, so that
			// `kubectl attach -it -c <name>` gives a shell later.
			Stdin:                    true,
			TTY:                      true,
			ImagePullPolicy:          corev1.PullIfNotPresent,
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			SecurityContext:          securityContext(pb.Spec.Profile, pb.Spec.RunAsUser),
		},
		TargetContainerName: pb.Spec.TargetContainerName,
	}
	if a := policy.ArtifactsOf(pb); a != nil {
		collectorContainer(&c, a)
	}
	return c
}

// restrictedUser is the user the restricted profile runs the container as.
// runAsNonRoot alone makes a kubelet refuse every image whose user is root or
// a name (busybox, most debug images), while status would count the
// container as added; a numeric non-root user works with any image, and
// 65532 is the "nonroot" user of distroless images, owning nothing of the
// target's.
const restrictedUser int64 = 65532

// securityContext is the container's securityContext for a profile, run as
// user (spec.runAsUser) when it is set. No profile is privileged or asks
// for a host namespace (ephemeral containers cannot have the latter anyway).
func securityContext(profile debugv1beta1.Profile, user *int64) *corev1.SecurityContext {
	switch profile {
	case debugv1beta1.ProfileGeneral:
		return &corev1.SecurityContext{
			Privileged:   ptr.To(false),
			RunAsUser:    user,
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_PTRACE"}},
		}
	case debugv1beta1.ProfileBaseline:
		return &corev1.SecurityContext{Privileged: ptr.To(false), RunAsUser: user}
	default: // restricted, and anything unknown
		if user == nil {
			user = ptr.To(restrictedUser)
		}
		return &corev1.SecurityContext{
			Privileged:               ptr.To(false),
			RunAsNonRoot:             ptr.To(true),
			RunAsUser:                user,
			AllowPrivilegeEscalation: ptr.To(false),
			Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		}
	}
}
