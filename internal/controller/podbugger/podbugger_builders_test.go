package podbugger

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
)

func TestContainerName(t *testing.T) {
	long := strings.Repeat("a", 100)
	tests := map[string]struct {
		name string
		want string // empty: hashed, only checked for validity and uniqueness
	}{
		"a valid label is kept":      {name: "web-debug", want: "web-debug"},
		"63 characters are kept":     {name: strings.Repeat("b", 63), want: strings.Repeat("b", 63)},
		"dots are not kept":          {name: "web.debug"},
		"64 characters are cut":      {name: strings.Repeat("b", 64)},
		"a long name is cut":         {name: long},
		"a long dotted name is cut":  {name: "x." + long},
		"a cut never ends in a dash": {name: strings.Repeat("c", 54) + "." + long},
	}
	seen := map[string]string{}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			got := policy.ContainerName(tt.name)
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Fatalf("policy.ContainerName(%q) = %q, not a container name: %v", tt.name, got, errs)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("policy.ContainerName(%q) = %q, want %q", tt.name, got, tt.want)
			}
			if got != policy.ContainerName(tt.name) {
				t.Errorf("policy.ContainerName(%q) is not stable", tt.name)
			}
		})
		seen[policy.ContainerName(tt.name)] = tt.name
	}
	if len(seen) != len(tests) {
		t.Errorf("two names share a container name: %v", seen)
	}
	// "web.debug" must not take the name of a PodBugger called "web-debug".
	if policy.ContainerName("web.debug") == policy.ContainerName("web-debug") {
		t.Error("web.debug and web-debug share a container name")
	}
}

func TestSecurityContextNeverPrivileged(t *testing.T) {
	tests := map[debugv1beta1.Profile]struct {
		nonRoot  bool
		user     int64 // 0: the image's
		addCaps  []corev1.Capability
		dropCaps []corev1.Capability
	}{
		// A numeric non-root user: with runAsNonRoot alone a kubelet refuses
		// images whose user is root, busybox's among them.
		debugv1beta1.ProfileRestricted: {nonRoot: true, user: 65532, dropCaps: []corev1.Capability{"ALL"}},
		debugv1beta1.ProfileBaseline:   {},
		debugv1beta1.ProfileGeneral:    {addCaps: []corev1.Capability{"SYS_PTRACE"}},
		"":                             {nonRoot: true, user: 65532, dropCaps: []corev1.Capability{"ALL"}},
	}
	for profile, tt := range tests {
		t.Run(string(profile), func(t *testing.T) {
			sc := securityContext(profile, nil)
			if sc.Privileged == nil || *sc.Privileged {
				t.Errorf("privileged must be false, got %v", sc.Privileged)
			}
			if got := sc.RunAsNonRoot != nil && *sc.RunAsNonRoot; got != tt.nonRoot {
				t.Errorf("runAsNonRoot = %v, want %v", got, tt.nonRoot)
			}
			if got := ptr.Deref(sc.RunAsUser, 0); got != tt.user {
				t.Errorf("runAsUser = %d, want %d", got, tt.user)
			}
			if tt.nonRoot {
				if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
					t.Error("restricted must not allow privilege escalation")
				}
				if sc.SeccompProfile == nil || sc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
					t.Error("restricted needs the RuntimeDefault seccomp profile")
				}
			}
			var add, drop []corev1.Capability
			if sc.Capabilities != nil {
				add, drop = sc.Capabilities.Add, sc.Capabilities.Drop
			}
			if !equalCaps(add, tt.addCaps) || !equalCaps(drop, tt.dropCaps) {
				t.Errorf("capabilities add %v drop %v, want add %v drop %v", add, drop, tt.addCaps, tt.dropCaps)
			}
		})
	}
}

// spec.runAsUser replaces the restricted profile's 65532 and the image's
// user of the others; the restricted profile stays non-root either way.
func TestSecurityContextRunAsUser(t *testing.T) {
	for _, profile := range []debugv1beta1.Profile{debugv1beta1.ProfileRestricted, debugv1beta1.ProfileBaseline, debugv1beta1.ProfileGeneral} {
		t.Run(string(profile), func(t *testing.T) {
			sc := securityContext(profile, ptr.To(int64(1000)))
			if got := ptr.Deref(sc.RunAsUser, 0); got != 1000 {
				t.Errorf("runAsUser = %d, want 1000", got)
			}
			if profile == debugv1beta1.ProfileRestricted && !ptr.Deref(sc.RunAsNonRoot, false) {
				t.Error("restricted must keep runAsNonRoot")
			}
		})
	}
}

func equalCaps(a, b []corev1.Capability) bool {
	return len(a) == len(b) && (len(a) == 0 || strings.Join(capStrings(a), ",") == strings.Join(capStrings(b), ","))
}

func capStrings(c []corev1.Capability) []string {
	out := make([]string, 0, len(c))
	for _, x := range c {
		out = append(out, string(x))
	}
	return out
}

// TestDebugContainerRunsTheImageTheAllowListApproved checks that the
// container gets the reference the allow-list compared, in full, however
// the PodBugger spells it: a short name left to the runtime could be pulled
// from any registry its unqualified-search list names.
func TestDebugContainerRunsTheImageTheAllowListApproved(t *testing.T) {
	allowed, err := policy.ParseImagePatterns([]string{"docker.io/library/busybox:*", "docker.io/library/busybox@*", "registry.example.com/tools/*"})
	if err != nil {
		t.Fatal(err)
	}
	tests := map[string]string{
		"busybox:1.36":                              "docker.io/library/busybox:1.36",
		"busybox":                                   "docker.io/library/busybox:latest",
		"index.docker.io/library/busybox:1.36":      "docker.io/library/busybox:1.36",
		"registry.example.com/tools/debug:2":        "registry.example.com/tools/debug:2",
		"busybox@sha256:" + strings.Repeat("a", 64): "docker.io/library/busybox@sha256:" + strings.Repeat("a", 64),
	}
	for written, want := range tests {
		if !allowed.Allows(written) {
			t.Fatalf("%s: not allowed", written)
		}
		pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Name: "dbg"}, Spec: debugv1beta1.PodBuggerSpec{Image: written}}
		if got := debugContainer(pb).Image; got != want {
			t.Errorf("spec.image %q: the container runs %q, want %q", written, got, want)
		}
	}
}

func TestDebugContainer(t *testing.T) {
	pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Name: "dbg"}, Spec: debugv1beta1.PodBuggerSpec{
		Image: "busybox:1.37", Command: []string{"sh"}, Args: []string{"-c", "sleep 1d"}, TargetContainerName: "app",
		Profile: debugv1beta1.ProfileBaseline,
	}}
	c := debugContainer(pb)
	if c.Name != "dbg" || c.Image != "docker.io/library/busybox:1.37" || c.TargetContainerName != "app" ||
		strings.Join(c.Command, " ") != "sh" || strings.Join(c.Args, " ") != "-c sleep 1d" {
		t.Errorf("debugContainer = %+v", c)
	}
	if !c.Stdin || !c.TTY {
		t.Error("the container must keep stdin and a TTY open for kubectl attach")
	}
}
