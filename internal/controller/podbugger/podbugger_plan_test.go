package podbugger

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
)

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

func withSpec(p corev1.Pod, change func(*corev1.PodSpec)) corev1.Pod {
	change(&p.Spec)
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
	// running is a running pod labelled app=web, created at created.
	running := func(name string, created int, ephemeral ...string) corev1.Pod {
		return testPod(name, corev1.PodRunning, web, created, ephemeral...)
	}

	tests := map[string]struct {
		spec     debugv1beta1.PodBuggerSpec
		pods     []corev1.Pod
		passOver []types.UID
		policy   policy.Policy
		carriers []string
		inject   []string
		spare    []string
		skipped  []string
	}{
		"running matching pods without the container, oldest first": {
			spec: debugv1beta1.PodBuggerSpec{MaxPods: 10},
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
			spec:     debugv1beta1.PodBuggerSpec{MaxPods: 10},
			pods:     []corev1.Pod{running("web-a", 1, "other", "dbg"), running("web-b", 2, "other")},
			carriers: []string{"web-a"},
			inject:   []string{"web-b"},
		},
		"a carrier that no longer matches still counts against maxPods": {
			spec: debugv1beta1.PodBuggerSpec{MaxPods: 2},
			pods: []corev1.Pod{
				testPod("relabelled", corev1.PodRunning, nil, 1, "dbg"),
				testPod("web-a", corev1.PodRunning, web, 2),
				testPod("web-b", corev1.PodRunning, web, 3),
			},
			carriers: []string{"relabelled"},
			inject:   []string{"web-a"},
			spare:    []string{"web-b"},
		},
		"maxPods reached: nothing more": {
			spec:     debugv1beta1.PodBuggerSpec{MaxPods: 1},
			pods:     []corev1.Pod{running("web-a", 1, "dbg"), running("web-b", 2)},
			carriers: []string{"web-a"},
			spare:    []string{"web-b"},
		},
		"pods beyond maxPods are spare, oldest first": {
			spec:   debugv1beta1.PodBuggerSpec{MaxPods: 1},
			pods:   []corev1.Pod{running("web-c", 3), running("web-a", 1), running("web-b", 2)},
			inject: []string{"web-a"},
			spare:  []string{"web-b", "web-c"},
		},
		"a refused pod is passed over and takes no place within maxPods": {
			spec:     debugv1beta1.PodBuggerSpec{MaxPods: 1},
			pods:     []corev1.Pod{running("web-a", 1), running("web-b", 2)},
			passOver: []types.UID{"uid-web-a"},
			inject:   []string{"web-b"},
		},
		"suspended: nothing new": {
			spec:     debugv1beta1.PodBuggerSpec{MaxPods: 10, Suspend: true},
			pods:     []corev1.Pod{running("web-a", 1, "dbg"), running("web-b", 2)},
			carriers: []string{"web-a"},
		},
		"a pod without the target container is skipped, and does not use up maxPods": {
			spec: debugv1beta1.PodBuggerSpec{MaxPods: 1, TargetContainerName: "app"},
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
		"pods that reach into their node are skipped, and do not use up maxPods": {
			spec: debugv1beta1.PodBuggerSpec{MaxPods: 1},
			pods: []corev1.Pod{
				withSpec(running("web-hostpid", 1), func(s *corev1.PodSpec) { s.HostPID = true }),
				withSpec(running("web-hostnet", 1), func(s *corev1.PodSpec) { s.HostNetwork = true }),
				withSpec(running("web-hostipc", 1), func(s *corev1.PodSpec) { s.HostIPC = true }),
				withSpec(running("web-privileged", 1), func(s *corev1.PodSpec) {
					s.InitContainers = []corev1.Container{{Name: "init", SecurityContext: &corev1.SecurityContext{Privileged: new(true)}}}
				}),
				withSpec(running("web-hostpath", 1), func(s *corev1.PodSpec) {
					s.Volumes = []corev1.Volume{{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
				}),
				running("web-plain", 2),
			},
			inject:  []string{"web-plain"},
			skipped: []string{"web-hostipc", "web-hostnet", "web-hostpath", "web-hostpid", "web-privileged"},
		},
		"with the general profile, pods adding capabilities beyond the baseline are skipped": {
			spec: debugv1beta1.PodBuggerSpec{MaxPods: 10, Profile: debugv1beta1.ProfileGeneral},
			pods: []corev1.Pod{
				withSpec(running("web-sysadmin", 1), func(s *corev1.PodSpec) {
					s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
				}),
				withSpec(running("web-chown", 2), func(s *corev1.PodSpec) {
					s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"CHOWN"}}}
				}),
			},
			inject:  []string{"web-chown"},
			skipped: []string{"web-sysadmin"},
		},
		"with the baseline profile, added capabilities are out of the debugger's reach": {
			spec: debugv1beta1.PodBuggerSpec{MaxPods: 10, Profile: debugv1beta1.ProfileBaseline},
			pods: []corev1.Pod{withSpec(running("web-sysadmin", 1), func(s *corev1.PodSpec) {
				s.Containers[0].SecurityContext = &corev1.SecurityContext{Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}}}
			})},
			inject: []string{"web-sysadmin"},
		},
		"the operator may allow pods that reach into their node": {
			spec:   debugv1beta1.PodBuggerSpec{MaxPods: 10},
			policy: policy.Policy{AllowHostAccess: true},
			pods:   []corev1.Pod{withSpec(running("web-hostpid", 1), func(s *corev1.PodSpec) { s.HostPID = true })},
			inject: []string{"web-hostpid"},
		},
		"a pod whose own container has the name is skipped": {
			spec:    debugv1beta1.PodBuggerSpec{MaxPods: 10},
			pods:    []corev1.Pod{sidecar},
			skipped: []string{"web-sidecar"},
		},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			pb := &debugv1beta1.PodBugger{ObjectMeta: metav1.ObjectMeta{Name: "dbg"}, Spec: tt.spec}
			passOver := map[types.UID]bool{}
			for _, uid := range tt.passOver {
				passOver[uid] = true
			}
			p := planFor(pb, labels.SelectorFromSet(web), tt.pods, passOver, nil, tt.policy)
			skipped := make([]*corev1.Pod, 0, len(p.skipped))
			for _, s := range p.skipped {
				skipped = append(skipped, s.pod)
			}
			for what, got := range map[string][2][]string{
				"carriers": {names(p.carriers), tt.carriers},
				"inject":   {names(p.inject), tt.inject},
				"spare":    {names(p.spare), tt.spare},
				"skipped":  {names(skipped), tt.skipped},
			} {
				if strings.Join(got[0], ",") != strings.Join(got[1], ",") {
					t.Errorf("%s = %v, want %v", what, got[0], got[1])
				}
			}
		})
	}
}
