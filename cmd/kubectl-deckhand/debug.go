package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	podbuggercontroller "github.com/deckhand-dev/deckhand/internal/controller/podbugger"
	"github.com/deckhand-dev/deckhand/internal/controller/podbugger/policy"
)

// debugFlags are the operator's PodBugger policy when it is not read from
// the installed manager.
type debugFlags struct {
	allowedImages       string
	allowGeneralProfile bool
	allowHostAccess     bool
	managerNamespace    string
}

func debugCommand() command {
	var f debugFlags
	return command{
		flags: func(fs *flag.FlagSet) {
			fs.StringVar(&f.allowedImages, "allowed-images", "", "the manager's --podbugger-allowed-images (default: read from the installed manager)")
			fs.BoolVar(&f.allowGeneralProfile, "allow-general-profile", false, "the manager's --podbugger-allow-general-profile")
			fs.BoolVar(&f.allowHostAccess, "allow-host-access", false, "the manager's --podbugger-allow-host-access")
			fs.StringVar(&f.managerNamespace, "manager-namespace", "deckhand-system", "where the installed manager runs")
		},
		run: func(x *cli, args []string) error {
			if len(args) != 1 {
				return fmt.Errorf("%w: debug POD", errUsage)
			}
			return debugPod(context.Background(), x, args[0], f)
		},
	}
}

// debugPod says, for each PodBugger of the pod's namespace whose selector
// matches the pod, what it would inject and which rule would block it.
func debugPod(ctx context.Context, x *cli, name string, f debugFlags) error {
	pod := &corev1.Pod{}
	if err := x.c.Get(ctx, client.ObjectKey{Namespace: x.namespace, Name: name}, pod); err != nil {
		return fmt.Errorf("reading pod %s/%s: %w", x.namespace, name, err)
	}
	ns := &corev1.Namespace{}
	if err := x.c.Get(ctx, client.ObjectKey{Name: pod.Namespace}, ns); err != nil {
		return fmt.Errorf("reading namespace %s: %w", pod.Namespace, err)
	}
	pol, source, err := operatorPolicy(ctx, x.c, f)
	if err != nil {
		return err
	}
	claimed, unread := claimedVolumes(ctx, x.c, pod)
	list := &debugv1beta1.PodBuggerList{}
	if err := x.c.List(ctx, list, client.InNamespace(pod.Namespace)); err != nil {
		return fmt.Errorf("listing PodBuggers of %s: %w", pod.Namespace, err)
	}
	p := func(format string, a ...any) { _, _ = fmt.Fprintf(x.out, format+"\n", a...) }
	p("Pod %s/%s (%s); the operator's policy: %s", pod.Namespace, pod.Name, pod.Status.Phase, source)
	for _, u := range unread {
		p("Not checked: %s", u)
	}
	found := false
	for i := range list.Items {
		pb := &list.Items[i]
		selector, err := metav1.LabelSelectorAsSelector(&pb.Spec.Selector)
		if err != nil || !selector.Matches(labels.Set(pod.Labels)) {
			continue
		}
		found = true
		p("")
		for _, line := range judge(pb, pod, ns.Labels, pol, claimed) {
			p("%s", line)
		}
	}
	if !found {
		p("No PodBugger of namespace %s selects this pod.", pod.Namespace)
	}
	return nil
}

// judge is what one PodBugger that selects pod would do to it, line by line.
func judge(pb *debugv1beta1.PodBugger, pod *corev1.Pod, namespaceLabels map[string]string, pol *policy.Policy, claimed map[string]*corev1.PersistentVolume) []string {
	lines := []string{"PodBugger " + pb.Name + ":"}
	if !policy.Injects(pb) {
		return append(lines, "  injects nothing: it only records the pod's failures as PodIncidents (no opt-in needed)")
	}
	c := podbuggercontroller.DebugContainerFor(pb)
	user := "the image's"
	if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil {
		user = fmt.Sprint(*sc.RunAsUser)
	}
	lines = append(lines, fmt.Sprintf("  would add the ephemeral container %s: image %s, profile %s, user %s", c.Name, c.Image, orDash(string(pb.Spec.Profile), "restricted"), user))
	for _, existing := range pod.Spec.EphemeralContainers {
		if existing.Name == c.Name {
			return append(lines, "  already there: the pod has it")
		}
	}
	var blocks []string
	if pol == nil {
		for _, v := range (policy.Chain{policy.NamespaceOptedIn, policy.UserNotRoot}).Evaluate(policy.Input{PodBugger: pb, NamespaceLabels: namespaceLabels}) {
			blocks = append(blocks, v.Reason+": "+v.Err.Error())
		}
		lines = append(lines, "  image allow-list and profile: not checked (the operator's policy is unknown: pass --allowed-images)")
	} else {
		for _, v := range policy.Rules.Evaluate(policy.Input{PodBugger: pb, NamespaceLabels: namespaceLabels, Policy: *pol}) {
			blocks = append(blocks, v.Reason+": "+v.Err.Error())
		}
	}
	if host := policy.HostAccess(pod, pb.Spec.Profile, claimed); len(host) > 0 && (pol == nil || !pol.AllowHostAccess) {
		blocks = append(blocks, policy.ReasonHostAccess+": the pod reaches its node ("+strings.Join(host, ", ")+"), and the operator does not allow host access")
	}
	if policy.InjectsRunning(pb) && pod.Status.Phase != corev1.PodRunning {
		blocks = append(blocks, "NotRunning: the pod is "+string(pod.Status.Phase)+"; the container is added once it runs")
	}
	if len(blocks) == 0 {
		return append(lines, "  nothing blocks it")
	}
	for _, b := range blocks {
		lines = append(lines, "  blocked by "+b)
	}
	return lines
}

// operatorPolicy is the PodBugger policy the operator set: from the flags
// given here, or read from the installed manager's Deployment. Nil when
// neither tells.
func operatorPolicy(ctx context.Context, c client.Client, f debugFlags) (*policy.Policy, string, error) {
	if f.allowedImages != "" {
		images, err := policy.ParseImagePatterns(strings.Split(f.allowedImages, ","))
		if err != nil {
			return nil, "", fmt.Errorf("--allowed-images: %w", err)
		}
		return &policy.Policy{AllowedImages: images, AllowGeneralProfile: f.allowGeneralProfile, AllowHostAccess: f.allowHostAccess}, "as given", nil
	}
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: f.managerNamespace, Name: "deckhand-controller-manager"}, d); err != nil {
		return nil, "unknown (the manager's Deployment could not be read: " + oneLine(err.Error(), 80) + ")", nil
	}
	var images []string
	var pol policy.Policy
	for _, ctr := range d.Spec.Template.Spec.Containers {
		args := append(append([]string{}, ctr.Command...), ctr.Args...)
		for i := 0; i < len(args); i++ {
			name, value, hasValue := strings.Cut(strings.TrimLeft(args[i], "-"), "=")
			if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
				value = args[i+1]
			}
			switch name {
			case "podbugger-allowed-images":
				images = append(images, strings.Split(value, ",")...)
			case "podbugger-allow-general-profile":
				pol.AllowGeneralProfile = !hasValue || value == "true"
			case "podbugger-allow-host-access":
				pol.AllowHostAccess = !hasValue || value == "true"
			}
		}
	}
	parsed, err := policy.ParseImagePatterns(images)
	if err != nil {
		return nil, "", fmt.Errorf("the manager's --podbugger-allowed-images: %w", err)
	}
	pol.AllowedImages = parsed
	return &pol, "read from " + f.managerNamespace + "/deckhand-controller-manager", nil
}

// claimedVolumes reads the PersistentVolumes the pod's claims are bound to,
// by volume name, as the controller does before it adds a container; what
// cannot be read is said, not guessed.
func claimedVolumes(ctx context.Context, c client.Client, pod *corev1.Pod) (map[string]*corev1.PersistentVolume, []string) {
	bound := map[string]*corev1.PersistentVolume{}
	var unread []string
	for volume, claim := range policy.ClaimedVolumes(pod) {
		pvc := &corev1.PersistentVolumeClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: pod.Namespace, Name: claim}, pvc); err != nil || pvc.Spec.VolumeName == "" {
			unread = append(unread, fmt.Sprintf("the volume %s (claim %s) could not be resolved: the controller skips the pod until it can", volume, claim))
			continue
		}
		pv := &corev1.PersistentVolume{}
		if err := c.Get(ctx, client.ObjectKey{Name: pvc.Spec.VolumeName}, pv); err != nil {
			unread = append(unread, fmt.Sprintf("the PersistentVolume %s of claim %s could not be read: %s", pvc.Spec.VolumeName, claim, oneLine(err.Error(), 80)))
			continue
		}
		bound[volume] = pv
	}
	return bound, unread
}
