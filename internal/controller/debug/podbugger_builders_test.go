package debug

import (
	"errors"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	debugv1alpha1 "github.com/deckhand-dev/deckhand/api/debug/v1alpha1"
	debugwebhook "github.com/deckhand-dev/deckhand/internal/webhook/debug/v1alpha1"
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
			got := ContainerName(tt.name)
			if errs := validation.IsDNS1123Label(got); len(errs) > 0 {
				t.Fatalf("ContainerName(%q) = %q, not a container name: %v", tt.name, got, errs)
			}
			if tt.want != "" && got != tt.want {
				t.Errorf("ContainerName(%q) = %q, want %q", tt.name, got, tt.want)
			}
			if got != ContainerName(tt.name) {
				t.Errorf("ContainerName(%q) is not stable", tt.name)
			}
		})
		seen[ContainerName(tt.name)] = tt.name
	}
	if len(seen) != len(tests) {
		t.Errorf("two names share a container name: %v", seen)
	}
	// "web.debug" must not take the name of a PodBugger called "web-debug".
	if ContainerName("web.debug") == ContainerName("web-debug") {
		t.Error("web.debug and web-debug share a container name")
	}
}

func TestSecurityContextNeverPrivileged(t *testing.T) {
	tests := map[debugv1alpha1.Profile]struct {
		nonRoot  bool
		addCaps  []corev1.Capability
		dropCaps []corev1.Capability
	}{
		debugv1alpha1.ProfileRestricted: {nonRoot: true, dropCaps: []corev1.Capability{"ALL"}},
		debugv1alpha1.ProfileBaseline:   {},
		debugv1alpha1.ProfileGeneral:    {addCaps: []corev1.Capability{"SYS_PTRACE"}},
		"":                              {nonRoot: true, dropCaps: []corev1.Capability{"ALL"}},
	}
	for profile, tt := range tests {
		t.Run(string(profile), func(t *testing.T) {
			sc := securityContext(profile)
			if sc.Privileged == nil || *sc.Privileged {
				t.Errorf("privileged must be false, got %v", sc.Privileged)
			}
			if got := sc.RunAsNonRoot != nil && *sc.RunAsNonRoot; got != tt.nonRoot {
				t.Errorf("runAsNonRoot = %v, want %v", got, tt.nonRoot)
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

func TestDebugContainer(t *testing.T) {
	pb := &debugv1alpha1.PodBugger{ObjectMeta: metav1.ObjectMeta{Name: "dbg"}, Spec: debugv1alpha1.PodBuggerSpec{
		Image: "busybox:1.37", Command: []string{"sh"}, Args: []string{"-c", "sleep 1d"}, TargetContainerName: "app",
		Profile: debugv1alpha1.ProfileBaseline,
	}}
	c := debugContainer(pb)
	if c.Name != "dbg" || c.Image != "busybox:1.37" || c.TargetContainerName != "app" ||
		strings.Join(c.Command, " ") != "sh" || strings.Join(c.Args, " ") != "-c sleep 1d" {
		t.Errorf("debugContainer = %+v", c)
	}
	if !c.Stdin || !c.TTY {
		t.Error("the container must keep stdin and a TTY open for kubectl attach")
	}
}

// testPod is a pod named name with one container, "app".
func testPod(name string, phase corev1.PodPhase, lbls map[string]string, created int, ephemeral ...string) corev1.Pod {
	p := corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name), Labels: lbls,
			CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))},
		Spec:   corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}},
		Status: corev1.PodStatus{Phase: phase},
	}
	for _, e := range ephemeral {
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers,
			corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: e}})
	}
	return p
}

func names(pods []*corev1.Pod) []string {
	out := make([]string, 0, len(pods))
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out
}

func TestPlanFor(t *testing.T) {
	web := map[string]string{"app": "web"}
	deleting := testPod("web-deleting", corev1.PodRunning, web, 1)
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Unix(9, 0)}
	sidecar := testPod("web-sidecar", corev1.PodRunning, web, 1)
	sidecar.Spec.InitContainers = []corev1.Container{{Name: "dbg"}}

	tests := map[string]struct {
		spec     debugv1alpha1.PodBuggerSpec
		pods     []corev1.Pod
		carriers []string
		inject   []string
		skipped  []string
	}{
		"running matching pods without the container, oldest first": {
			spec: debugv1alpha1.PodBuggerSpec{MaxPods: 10},
			pods: []corev1.Pod{
				testPod("web-b", corev1.PodRunning, web, 2),
				testPod("web-a", corev1.PodRunning, web, 1),
				testPod("web-pending", corev1.PodPending, web, 1),
				testPod("db", corev1.PodRunning, map[string]string{"app": "db"}, 1),
				testPod("web-done", corev1.PodSucceeded, web, 1),
				deleting,
			},
			inject: []string{"web-a", "web-b"},
		},
		"a pod with the container is a carrier, never injected twice": {
			spec: debugv1alpha1.PodBuggerSpec{MaxPods: 10},
			pods: []corev1.Pod{
				testPod("web-a", corev1.PodRunning, web, 1, "other", "dbg"),
				testPod("web-b", corev1.PodRunning, web, 2, "other"),
			},
			carriers: []string{"web-a"},
			inject:   []string{"web-b"},
		},
		"a carrier that no longer matches still counts against maxPods": {
			spec: debugv1alpha1.PodBuggerSpec{MaxPods: 2},
			pods: []corev1.Pod{
				testPod("relabelled", corev1.PodRunning, nil, 1, "dbg"),
				testPod("web-a", corev1.PodRunning, web, 2),
				testPod("web-b", corev1.PodRunning, web, 3),
			},
			carriers: []string{"relabelled"},
			inject:   []string{"web-a"},
		},
		"maxPods reached: nothing more": {
			spec: debugv1alpha1.PodBuggerSpec{MaxPods: 1},
			pods: []corev1.Pod{
				testPod("web-a", corev1.PodRunning, web, 1, "dbg"),
				testPod("web-b", corev1.PodRunning, web, 2),
			},
			carriers: []string{"web-a"},
		},
		"suspended: nothing new": {
			spec: debugv1alpha1.PodBuggerSpec{MaxPods: 10, Suspend: true},
			pods: []corev1.Pod{
				testPod("web-a", corev1.PodRunning, web, 1, "dbg"),
				testPod("web-b", corev1.PodRunning, web, 2),
			},
			carriers: []string{"web-a"},
		},
		"a pod without the target container is skipped, and does not use up maxPods": {
			spec: debugv1alpha1.PodBuggerSpec{MaxPods: 1, TargetContainerName: "app"},
			pods: []corev1.Pod{
				func() corev1.Pod {
					p := testPod("web-a", corev1.PodRunning, web, 1)
					p.Spec.Containers[0].Name = "nginx"
					return p
				}(),
				testPod("web-b", corev1.PodRunning, web, 2),
			},
			inject:  []string{"web-b"},
			skipped: []string{"web-a"},
		},
		"a pod whose own container has the name is skipped": {
			spec:    debugv1alpha1.PodBuggerSpec{MaxPods: 10},
			pods:    []corev1.Pod{sidecar},
			skipped: []string{"web-sidecar"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pb := &debugv1alpha1.PodBugger{ObjectMeta: metav1.ObjectMeta{Name: "dbg"}, Spec: tt.spec}
			p := planFor(pb, labels.SelectorFromSet(web), tt.pods)
			skipped := make([]*corev1.Pod, 0, len(p.skipped))
			for _, s := range p.skipped {
				skipped = append(skipped, s.pod)
			}
			for what, got := range map[string][2][]string{
				"carriers": {names(p.carriers), tt.carriers},
				"inject":   {names(p.inject), tt.inject},
				"skipped":  {names(skipped), tt.skipped},
			} {
				if strings.Join(got[0], ",") != strings.Join(got[1], ",") {
					t.Errorf("%s = %v, want %v", what, got[0], got[1])
				}
			}
		})
	}
}

func TestComputeStatus(t *testing.T) {
	now := time.Unix(1000, 0)
	earlier := metav1.NewTime(time.Unix(500, 0))
	pb := func(spec debugv1alpha1.PodBuggerSpec, pods ...debugv1alpha1.DebuggedPod) *debugv1alpha1.PodBugger {
		return &debugv1alpha1.PodBugger{ObjectMeta: metav1.ObjectMeta{Generation: 3}, Spec: spec,
			Status: debugv1alpha1.PodBuggerStatus{Pods: pods}}
	}
	violation := debugwebhook.Violation{Reason: debugv1alpha1.ReasonImageNotAllowed,
		Err: field.Forbidden(field.NewPath("spec", "image"), "no")}

	tests := map[string]struct {
		pb        *debugv1alpha1.PodBugger
		o         observation
		installed int32
		ready     metav1.ConditionStatus
		reason    string
		blocked   metav1.ConditionStatus
		times     map[string]metav1.Time
	}{
		"active; a known pod keeps its time, a new one gets the injection time": {
			pb: pb(debugv1alpha1.PodBuggerSpec{MaxPods: 10}, debugv1alpha1.DebuggedPod{Name: "a", UID: "ua", Time: earlier}),
			o: observation{now: now, carriers: map[types.UID]carrier{
				"ua": {name: "a"}, "ub": {name: "b", addedAt: time.Unix(900, 0)}, "uc": {name: "c"}}},
			installed: 3, ready: metav1.ConditionTrue, reason: debugv1alpha1.ReasonActive, blocked: metav1.ConditionFalse,
			times: map[string]metav1.Time{"a": earlier, "b": metav1.NewTime(time.Unix(900, 0)), "c": metav1.NewTime(now)},
		},
		"blocked wins over everything": {
			pb:        pb(debugv1alpha1.PodBuggerSpec{MaxPods: 1, Suspend: true}),
			o:         observation{now: now, carriers: map[types.UID]carrier{"ua": {name: "a"}}, violations: []debugwebhook.Violation{violation}},
			installed: 1, ready: metav1.ConditionFalse, reason: debugv1alpha1.ReasonImageNotAllowed, blocked: metav1.ConditionTrue,
		},
		"injection failed": {
			pb:        pb(debugv1alpha1.PodBuggerSpec{MaxPods: 10}),
			o:         observation{now: now, carriers: map[types.UID]carrier{}, injectErr: errors.New("forbidden")},
			installed: 0, ready: metav1.ConditionFalse, reason: debugv1alpha1.ReasonInjectionFailed, blocked: metav1.ConditionFalse,
		},
		"suspended": {
			pb:        pb(debugv1alpha1.PodBuggerSpec{MaxPods: 10, Suspend: true}),
			o:         observation{now: now, carriers: map[types.UID]carrier{}},
			installed: 0, ready: metav1.ConditionTrue, reason: debugv1alpha1.ReasonSuspended, blocked: metav1.ConditionFalse,
		},
		"at maxPods": {
			pb:        pb(debugv1alpha1.PodBuggerSpec{MaxPods: 1}),
			o:         observation{now: now, carriers: map[types.UID]carrier{"ua": {name: "a"}}},
			installed: 1, ready: metav1.ConditionTrue, reason: debugv1alpha1.ReasonMaxPodsReached, blocked: metav1.ConditionFalse,
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			s := computeStatus(tt.pb, tt.o)
			if s.Installed != tt.installed || s.ObservedGeneration != 3 {
				t.Errorf("installed %d generation %d, want %d and 3", s.Installed, s.ObservedGeneration, tt.installed)
			}
			ready := meta.FindStatusCondition(s.Conditions, debugv1alpha1.ConditionReady)
			blocked := meta.FindStatusCondition(s.Conditions, debugv1alpha1.ConditionBlocked)
			if ready == nil || ready.Status != tt.ready || ready.Reason != tt.reason || ready.ObservedGeneration != 3 {
				t.Errorf("Ready = %+v, want %s %s", ready, tt.ready, tt.reason)
			}
			if blocked == nil || blocked.Status != tt.blocked {
				t.Errorf("Blocked = %+v, want %s", blocked, tt.blocked)
			}
			for _, p := range s.Pods {
				if want, ok := tt.times[p.Name]; ok && !p.Time.Equal(&want) {
					t.Errorf("pod %s time %v, want %v", p.Name, p.Time, want)
				}
			}
		})
	}
}

func TestComputeStatusBoundsThePodList(t *testing.T) {
	carriers := map[types.UID]carrier{}
	for i := range debugv1alpha1.MaxStatusPods + 20 {
		carriers[types.UID(strings.Repeat("u", i+1))] = carrier{name: strings.Repeat("p", i+1), addedAt: time.Unix(int64(i+1), 0)}
	}
	s := computeStatus(&debugv1alpha1.PodBugger{Spec: debugv1alpha1.PodBuggerSpec{MaxPods: 1000}},
		observation{now: time.Unix(5000, 0), carriers: carriers})
	if s.Installed != int32(debugv1alpha1.MaxStatusPods+20) || len(s.Pods) != debugv1alpha1.MaxStatusPods {
		t.Fatalf("installed %d, %d pods listed", s.Installed, len(s.Pods))
	}
	if s.Pods[0].Name != "p" {
		t.Errorf("the earliest pod should come first, got %s", s.Pods[0].Name)
	}
}
