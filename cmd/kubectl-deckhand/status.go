package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	appsv1beta1 "github.com/deckhand-dev/deckhand/api/apps/v1beta1"
	deckhandbatchv1 "github.com/deckhand-dev/deckhand/api/batch/v1"
	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
	modelv1 "github.com/deckhand-dev/deckhand/api/model/v1"
)

var scheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, appsv1beta1.AddToScheme,
		deckhandbatchv1.AddToScheme, debugv1beta1.AddToScheme, modelv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err)
		}
	}
	return s
}()

// statusKind is a Deckhand kind with Ready and Stalled conditions.
type statusKind struct {
	gvk     schema.GroupVersionKind
	cluster bool
}

// statusKinds are the Deckhand kinds the apiserver serves with Ready and
// Stalled conditions: every resource of the category deckhand that has a
// status, in its preferred version, ordered by kind. They are read from
// discovery, so that a kind installed after this plugin was built is listed
// too.
func statusKinds(lists []*metav1.APIResourceList) []statusKind {
	var out []statusKind
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil || !strings.HasSuffix(gv.Group, ".deckhand.dev") {
			continue
		}
		withStatus := map[string]bool{}
		for _, r := range l.APIResources {
			if name, sub, ok := strings.Cut(r.Name, "/"); ok && sub == "status" {
				withStatus[name] = true
			}
		}
		for _, r := range l.APIResources {
			if withStatus[r.Name] && slices.Contains(r.Categories, "deckhand") {
				out = append(out, statusKind{gvk: gv.WithKind(r.Kind), cluster: !r.Namespaced})
			}
		}
	}
	slices.SortFunc(out, func(a, b statusKind) int { return strings.Compare(a.gvk.Kind, b.gvk.Kind) })
	return out
}

// deckhandResources are the resources of each Deckhand API group in its
// preferred version, subresources among them: discovery's
// ServerPreferredResources leaves subresources out, and a kind's status
// subresource is what says it has Ready and Stalled conditions. Only
// Deckhand's groups are asked, so another group that is down (an
// aggregated API) stops nothing.
func deckhandResources(d discovery.DiscoveryInterface) ([]*metav1.APIResourceList, error) {
	groups, err := d.ServerGroups()
	if err != nil {
		return nil, err
	}
	var lists []*metav1.APIResourceList
	for _, g := range groups.Groups {
		if !strings.HasSuffix(g.Name, ".deckhand.dev") {
			continue
		}
		l, err := d.ServerResourcesForGroupVersion(g.PreferredVersion.GroupVersion)
		if err != nil {
			return nil, err
		}
		lists = append(lists, l)
	}
	return lists, nil
}

func statusCommand() command {
	return command{run: func(x *cli, args []string) error {
		if len(args) != 0 {
			return fmt.Errorf("%w: status takes no arguments", errUsage)
		}
		rows, err := statusRows(context.Background(), x)
		if err != nil {
			return err
		}
		return printStatus(x, rows)
	}}
}

// statusRow is one object's line.
type statusRow struct {
	kind, namespace, name  string
	ready, stalled, reason string
	message                string
}

func statusRows(ctx context.Context, x *cli) ([]statusRow, error) {
	lists, err := deckhandResources(x.discovery)
	if err != nil {
		return nil, fmt.Errorf("discovering Deckhand's kinds: %w", err)
	}
	var rows []statusRow
	for _, k := range statusKinds(lists) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
		var opts []client.ListOption
		if !k.cluster && !x.allNamespaces {
			opts = append(opts, client.InNamespace(x.namespace))
		}
		if err := x.c.List(ctx, list, opts...); err != nil {
			if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
				continue // the kind is not installed
			}
			if apierrors.IsForbidden(err) {
				rows = append(rows, statusRow{kind: k.gvk.Kind, ready: "?", stalled: "?", reason: "Forbidden", message: "you may not list " + k.gvk.Kind + "s here"})
				continue
			}
			return nil, fmt.Errorf("listing %ss: %w", k.gvk.Kind, err)
		}
		for i := range list.Items {
			rows = append(rows, rowOf(k.gvk.Kind, &list.Items[i]))
		}
	}
	return rows, nil
}

// rowOf reads an object's Ready and Stalled conditions: the reason and
// message of whichever says more (Stalled when true, else Ready when not
// true, else Ready's).
func rowOf(kind string, obj *unstructured.Unstructured) statusRow {
	row := statusRow{kind: kind, namespace: obj.GetNamespace(), name: obj.GetName(), ready: "Unknown", stalled: "False"}
	conditions, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	byType := map[string]metav1.Condition{}
	for _, c := range conditions {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		var cond metav1.Condition
		if runtime.DefaultUnstructuredConverter.FromUnstructured(m, &cond) == nil {
			byType[cond.Type] = cond
		}
	}
	ready, hasReady := byType["Ready"]
	stalled, hasStalled := byType["Stalled"]
	if hasReady {
		row.ready = string(ready.Status)
		row.reason, row.message = ready.Reason, ready.Message
	} else {
		row.reason, row.message = "NotObserved", "Deckhand has not reported on it yet"
	}
	if hasStalled {
		row.stalled = string(stalled.Status)
		if stalled.Status == metav1.ConditionTrue {
			row.reason, row.message = stalled.Reason, stalled.Message
		}
	}
	if obsolete := obj.GetGeneration(); hasReady && ready.ObservedGeneration != 0 && ready.ObservedGeneration < obsolete {
		row.message = fmt.Sprintf("(for generation %d of %d) %s", ready.ObservedGeneration, obsolete, row.message)
	}
	return row
}

func printStatus(x *cli, rows []statusRow) error {
	if len(rows) == 0 {
		where := "namespace " + x.namespace
		if x.allNamespaces {
			where = "any namespace"
		}
		_, err := fmt.Fprintf(x.out, "No Deckhand objects in %s.\n", where)
		return err
	}
	slices.SortStableFunc(rows, func(a, b statusRow) int {
		return strings.Compare(a.namespace+"/"+a.name, b.namespace+"/"+b.name)
	})
	w := tabwriter.NewWriter(x.out, 0, 4, 2, ' ', 0)
	_, _ = fmt.Fprintln(w, "KIND\tNAMESPACE\tNAME\tREADY\tSTALLED\tREASON\tMESSAGE")
	for _, r := range rows {
		ns := r.namespace
		if ns == "" {
			ns = "-"
		}
		_, _ = fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.kind, ns, r.name, r.ready, r.stalled, r.reason, oneLine(r.message, 100))
	}
	return w.Flush()
}

// oneLine is s on one line, cut to at most n runes.
func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}
