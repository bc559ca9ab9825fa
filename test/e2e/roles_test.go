//go:build e2e

package e2e

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	"github.com/deckhand-dev/deckhand/internal/manager"
	"github.com/deckhand-dev/deckhand/internal/testenv"
)

// The installed editor and viewer roles aggregate into the built-in edit
// and view roles (the controller-manager's clusterrole-aggregation
// controller does it): a user bound to edit in a namespace can use Deckhand
// there and nowhere else, a user bound to view can look but not change; and
// neither may create ClusterJobWatchers or, through edit, PodBuggers, nor
// write a PodIncident (a record says what Deckhand saw).
func TestNamespaceUsersGetDeckhandThroughEditAndView(t *testing.T) {
	g := testenv.NewG(t)
	ctx := context.Background()
	c.RunManager(t) // PodSets are admitted by its webhook
	mine, theirs := c.Namespace(t, nil), c.Namespace(t, nil)
	bind(t, mine, "alice", "edit")
	bind(t, mine, "bob", "view")
	alice, bob := impersonate(t, "alice"), impersonate(t, "bob")

	// Aggregation is asynchronous: wait until edit carries the PodSet rules.
	g.Eventually(func() (bool, error) { return allowed(ctx, "alice", mine, "apps.deckhand.dev", "podsets", "create") }).Should(BeTrue())

	set := func(ns string) *appsv1beta1.PodSet {
		return &appsv1beta1.PodSet{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "roles"}, Spec: appsv1beta1.PodSetSpec{Replicas: 1}}
	}
	g.Expect(alice.Create(ctx, set(mine))).To(Succeed(), "edit creates a PodSet in its namespace")
	g.Expect(alice.Create(ctx, set(theirs))).To(Satisfy(apierrors.IsForbidden), "edit in one namespace creates nothing in another")
	g.Expect(bob.Get(ctx, client.ObjectKeyFromObject(set(mine)), &appsv1beta1.PodSet{})).To(Succeed(), "view gets a PodSet")
	bobsSet := set(mine)
	bobsSet.Name = "bobs"
	g.Expect(bob.Create(ctx, bobsSet)).To(Satisfy(apierrors.IsForbidden), "view creates no PodSet")

	// The same, per kind and verb, as the apiserver decides it.
	for _, tc := range []struct {
		user, ns, group, resource, verb string
		want                            bool
	}{
		{"alice", mine, "apps.deckhand.dev", "podsets/scale", "update", true},
		{"alice", mine, "model.deckhand.dev", "modelboxes", "create", true},
		{"alice", mine, "batch.deckhand.dev", "jobwatchers", "delete", true},
		{"alice", theirs, "batch.deckhand.dev", "jobwatchers", "create", false},
		{"alice", "", "batch.deckhand.dev", "clusterjobwatchers", "create", false},
		{"alice", mine, "debug.deckhand.dev", "podbuggers", "create", false},
		{"alice", mine, "debug.deckhand.dev", "podbuggers", "list", true},
		{"bob", mine, "model.deckhand.dev", "modelboxes", "list", true},
		{"bob", mine, "batch.deckhand.dev", "jobwatchers", "watch", true},
		{"bob", mine, "debug.deckhand.dev", "podbuggers", "get", true},
		{"bob", mine, "model.deckhand.dev", "modelboxes", "update", false},
		// PodIncidents: readers of a record can read the log it copies;
		// editors may delete records, nobody but Deckhand writes one.
		{"bob", mine, "debug.deckhand.dev", "podincidents", "list", true},
		{"bob", mine, "", "pods/log", "get", true},
		{"bob", mine, "debug.deckhand.dev", "podincidents", "delete", false},
		{"alice", mine, "debug.deckhand.dev", "podincidents", "delete", true},
		{"alice", mine, "debug.deckhand.dev", "podincidents", "create", false},
		{"alice", mine, "debug.deckhand.dev", "podincidents", "update", false},
	} {
		got, err := allowed(ctx, tc.user, tc.ns, tc.group, tc.resource, tc.verb)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got).To(Equal(tc.want), "%s %s %s in %q", tc.user, tc.verb, tc.resource, tc.ns)
	}
}

// bind binds user to the built-in ClusterRole role in namespace ns.
func bind(t *testing.T, ns, user, role string) {
	t.Helper()
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: user + "-" + role},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := c.Client.Create(context.Background(), rb); err != nil {
		t.Fatalf("binding %s to %s: %v", user, role, err)
	}
}

// impersonate returns a client that acts as user.
func impersonate(t *testing.T, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(c.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user}
	cl, err := client.New(cfg, client.Options{Scheme: manager.Scheme})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// allowed asks the apiserver whether user may verb resource in ns.
func allowed(ctx context.Context, user, ns, group, resource, verb string) (bool, error) {
	attrs := &authorizationv1.ResourceAttributes{Namespace: ns, Group: group, Resource: resource, Verb: verb}
	if res, sub, ok := strings.Cut(resource, "/"); ok {
		attrs.Resource, attrs.Subresource = res, sub
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user, ResourceAttributes: attrs}}
	if err := c.Client.Create(ctx, sar); err != nil {
		return false, err
	}
	return sar.Status.Allowed, nil
}
