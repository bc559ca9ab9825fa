package installs

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// webhookFrom is the peers of the NetworkPolicy's rule for the webhook port.
func webhookFrom(t *testing.T, objs []*unstructured.Unstructured) []any {
	t.Helper()
	np := find(objs, "NetworkPolicy", "deckhand-controller-manager")
	if np == nil {
		t.Fatal("no NetworkPolicy deckhand-controller-manager")
	}
	rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
	for _, r := range rules {
		rule := r.(map[string]any)
		ports, _, _ := unstructured.NestedSlice(rule, "ports")
		if len(ports) == 1 && fmt.Sprint(ports[0].(map[string]any)["port"]) == "9443" {
			from, _, _ := unstructured.NestedSlice(rule, "from")
			return from
		}
	}
	t.Fatal("the NetworkPolicy has no rule for the webhook port")
	return nil
}

// The chart cannot know where the apiserver calls webhooks from, so by
// default the webhook port admits every address, as config/network-policy
// does; networkPolicy.apiserverCIDRs narrows it to those CIDRs alone, and
// leaves the other ports' rules as they were.
func TestTheWebhookPortAdmitsOnlyTheApiserverOnceItsAddressIsGiven(t *testing.T) {
	g := NewWithT(t)
	open := []any{
		map[string]any{"ipBlock": map[string]any{"cidr": "0.0.0.0/0"}},
		map[string]any{"ipBlock": map[string]any{"cidr": "::/0"}},
	}
	g.Expect(webhookFrom(t, helmTemplate(t))).To(Equal(open))
	g.Expect(webhookFrom(t, kustomize(t, "config/default"))).To(Equal(open))

	defaults := find(helmTemplate(t), "NetworkPolicy", "deckhand-controller-manager")
	narrowed := helmTemplate(t, "--set", "networkPolicy.apiserverCIDRs={10.0.0.2/32,fd00::2/128}")
	g.Expect(webhookFrom(t, narrowed)).To(Equal([]any{
		map[string]any{"ipBlock": map[string]any{"cidr": "10.0.0.2/32"}},
		map[string]any{"ipBlock": map[string]any{"cidr": "fd00::2/128"}},
	}))
	others := func(np *unstructured.Unstructured) []any {
		rules, _, _ := unstructured.NestedSlice(np.Object, "spec", "ingress")
		return slices.DeleteFunc(rules, func(r any) bool {
			ports, _, _ := unstructured.NestedSlice(r.(map[string]any), "ports")
			return fmt.Sprint(ports[0].(map[string]any)["port"]) == "9443"
		})
	}
	g.Expect(others(find(narrowed, "NetworkPolicy", "deckhand-controller-manager"))).To(Equal(others(defaults)))
}

// webhook.clientCA.configMap mounts that ConfigMap into the manager and
// points --webhook-client-ca-file at its key; unset, neither.
func TestTheWebhookClientCAReachesTheManager(t *testing.T) {
	g := NewWithT(t)
	args, volumes, mounts := managerOf(helmTemplate(t))
	g.Expect(strings.Join(args, " ")).NotTo(ContainSubstring("--webhook-client-ca-file"))
	g.Expect(volumes + mounts).NotTo(ContainSubstring("webhook-client-ca"))

	args, volumes, mounts = managerOf(helmTemplate(t, "--set", "webhook.clientCA.configMap=apiserver-webhook-ca", "--set", "webhook.clientCA.key=ca.pem"))
	g.Expect(args).To(ContainElement("--webhook-client-ca-file=/etc/deckhand/webhook-client-ca/ca.pem"))
	g.Expect(volumes).To(ContainSubstring("map[configMap:map[name:apiserver-webhook-ca] name:webhook-client-ca]"))
	g.Expect(mounts).To(ContainSubstring("map[mountPath:/etc/deckhand/webhook-client-ca name:webhook-client-ca readOnly:true]"))
}

// managerOf is the rendered manager's arguments, and its volumes and mounts
// as text.
func managerOf(objs []*unstructured.Unstructured) (args []string, volumes, mounts string) {
	d := find(objs, "Deployment", "deckhand-controller-manager")
	containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	c := containers[0].(map[string]any)
	args, _, _ = unstructured.NestedStringSlice(c, "args")
	v, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "volumes")
	m, _, _ := unstructured.NestedSlice(c, "volumeMounts")
	return args, fmt.Sprint(v), fmt.Sprint(m)
}

// The platform team's Secret of notification sinks reaches the manager as
// the file its flag names, read only, when podBugger.incidentSinks names
// one; by default there is none.
func TestTheIncidentSinksSecretReachesTheManager(t *testing.T) {
	g := NewWithT(t)
	args, volumes, mounts := managerOf(helmTemplate(t))
	g.Expect(strings.Join(args, " ")).NotTo(ContainSubstring("--podbugger-incident-sinks-file"))
	g.Expect(volumes + mounts).NotTo(ContainSubstring("incident-sinks"))

	args, volumes, mounts = managerOf(helmTemplate(t, "--set", "podBugger.incidentSinks.secretName=deckhand-sinks"))
	g.Expect(args).To(ContainElement("--podbugger-incident-sinks-file=/etc/deckhand/incident-sinks/sinks.yaml"))
	g.Expect(volumes).To(ContainSubstring("map[name:incident-sinks secret:map[items:[map[key:sinks.yaml path:sinks.yaml]] secretName:deckhand-sinks]]"))
	g.Expect(mounts).To(ContainSubstring("map[mountPath:/etc/deckhand/incident-sinks name:incident-sinks readOnly:true]"))
}

// Both installs ship the ClusterRole a namespace's owner binds so that
// records remove the values their pods' environments take from Secrets:
// get on Secrets alone, bound by neither install. The chart's
// podBugger.secretEnv.clusterWide binds it (in each watched namespace when
// it has them); read=false turns the reads off and binds nothing.
func TestTheSecretEnvRoleIsShippedUnboundUnlessTheChartIsToldToBindIt(t *testing.T) {
	g := NewWithT(t)
	getSecrets := []string{"  secrets  *  [get]"}
	roleRules := func(objs []*unstructured.Unstructured) []string {
		role := find(objs, "ClusterRole", "deckhand-podbugger-secret-env")
		if role == nil {
			return nil
		}
		verbs := map[string][]string{}
		rules, _, _ := unstructured.NestedSlice(role.Object, "rules")
		for _, r := range rules {
			addRule(verbs, "", r.(map[string]any))
		}
		var lines []string
		for k, vs := range verbs {
			lines = append(lines, k+"  ["+strings.Join(vs, " ")+"]")
		}
		return lines
	}
	secretGrants := func(objs []*unstructured.Unstructured) []string {
		return slices.DeleteFunc(grants(t, objs), func(l string) bool {
			return !strings.Contains(l, "  secrets  *  ")
		})
	}
	for name, objs := range map[string][]*unstructured.Unstructured{
		"config/default":             kustomize(t, "config/default"),
		"config/overlays/namespaced": kustomize(t, "config/overlays/namespaced"),
		"the chart":                  helmTemplate(t),
		"the namespaced chart":       helmTemplate(t, "--set", "watchNamespaces={deckhand-tenant}"),
	} {
		g.Expect(roleRules(objs)).To(Equal(getSecrets), name)
		g.Expect(secretGrants(objs)).To(BeEmpty(), "%s binds the Secret role itself", name)
	}
	args, _, _ := managerOf(helmTemplate(t))
	g.Expect(strings.Join(args, " ")).NotTo(ContainSubstring("--podbugger-redact-secret-env"))

	g.Expect(secretGrants(helmTemplate(t, "--set", "podBugger.secretEnv.clusterWide=true"))).
		To(Equal([]string{"cluster-wide  secrets  *  [get]"}))
	g.Expect(secretGrants(helmTemplate(t, "--set", "podBugger.secretEnv.clusterWide=true", "--set", "watchNamespaces={a,b}"))).
		To(Equal([]string{"namespace a  secrets  *  [get]", "namespace b  secrets  *  [get]"}))

	off := helmTemplate(t, "--set", "podBugger.secretEnv.clusterWide=true", "--set", "podBugger.secretEnv.read=false")
	g.Expect(secretGrants(off)).To(BeEmpty())
	args, _, _ = managerOf(off)
	g.Expect(args).To(ContainElement("--podbugger-redact-secret-env=false"))
}
