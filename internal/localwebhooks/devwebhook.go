// Package localwebhooks makes Deckhand's admission webhooks reach a manager that
// runs outside the cluster (`make run`, the e2e tests): it installs the
// generated webhook configurations pointed at the manager's local address
// instead of at the in-cluster Service. The manager's self-signed mode
// (internal/webhookcert) then issues a certificate for that address and
// injects its CA, exactly as it does in a cluster. The CRDs converted by a
// webhook (PodSet, PodBugger) get their conversion webhook pointed there too.
package localwebhooks

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	sigsyaml "sigs.k8s.io/yaml"
)

// urlField is the clientConfig field naming a webhook by URL.
const urlField = "url"

// NamePrefix is put before the generated configurations' names, as the
// kustomize install does.
const NamePrefix = "deckhand-"

// Install applies every webhook configuration in manifests with its
// clientConfig pointing at https://host:port. manifests is
// config/webhook/manifests.yaml as controller-gen writes it; an empty one
// installs nothing. The caBundle is left to the manager.
func Install(ctx context.Context, c client.Client, manifests []byte, host string, port int) error {
	objs, err := Configurations(manifests, fmt.Sprintf("https://%s", net.JoinHostPort(host, fmt.Sprint(port))))
	if err != nil {
		return err
	}
	for _, obj := range objs {
		if err := replace(ctx, c, obj); err != nil {
			return fmt.Errorf("installing %s %s: %w", obj.GetKind(), obj.GetName(), err)
		}
	}
	return pointConversion(ctx, c, fmt.Sprintf("https://%s/convert", net.JoinHostPort(host, fmt.Sprint(port))))
}

// pointConversion makes every Deckhand CRD whose versions are converted by a
// webhook call url instead of the in-cluster Service. The caBundle stays:
// the manager keeps it.
func pointConversion(ctx context.Context, c client.Client, url string) error {
	crds := &unstructured.UnstructuredList{}
	crds.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinitionList"})
	if err := c.List(ctx, crds); err != nil {
		return fmt.Errorf("listing CRDs: %w", err)
	}
	for i := range crds.Items {
		crd := &crds.Items[i]
		group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
		strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy")
		if !strings.HasSuffix(group, ".deckhand.dev") || strategy != "Webhook" {
			continue
		}
		bundle, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "webhook", "clientConfig", "caBundle")
		clientConfig := map[string]any{urlField: url}
		if bundle != "" {
			clientConfig["caBundle"] = bundle
		}
		if err := unstructured.SetNestedMap(crd.Object, clientConfig, "spec", "conversion", "webhook", "clientConfig"); err != nil {
			return err
		}
		if err := c.Update(ctx, crd); err != nil {
			return fmt.Errorf("pointing the conversion webhook of CRD %s at %s: %w", crd.GetName(), url, err)
		}
	}
	return nil
}

// PointCRDs rewrites the CRDs in manifests (a YAML stream, as `kubectl
// kustomize config/crd` prints it) so that those converted by a webhook call
// url instead of the in-cluster Service, and returns them as a YAML stream.
// `make run` applies its CRDs this way: applied with the Service reference
// over CRDs a previous run pointed at a URL, the apiserver would hold both
// and refuse the CRD ("exactly one of url or service is required"), so a
// second `make run` on the same cluster failed.
func PointCRDs(manifests []byte, url string) ([]byte, error) {
	var out bytes.Buffer
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		obj := map[string]any{}
		if err := dec.Decode(&obj); err != nil {
			if errors.Is(err, io.EOF) {
				return out.Bytes(), nil
			}
			return nil, fmt.Errorf("reading CRDs: %w", err)
		}
		if len(obj) == 0 {
			continue
		}
		if strategy, _, _ := unstructured.NestedString(obj, "spec", "conversion", "strategy"); strategy == "Webhook" {
			if err := unstructured.SetNestedMap(obj, map[string]any{urlField: url}, "spec", "conversion", "webhook", "clientConfig"); err != nil {
				return nil, err
			}
		}
		doc, err := sigsyaml.Marshal(obj)
		if err != nil {
			return nil, err
		}
		out.WriteString("---\n")
		out.Write(doc)
	}
}

// replace creates obj, or overwrites the webhooks of the existing object of
// that name. Not server-side apply: an installed configuration's service
// reference, owned by another field manager, would survive next to the URL.
func replace(ctx context.Context, c client.Client, obj *unstructured.Unstructured) error {
	current := &unstructured.Unstructured{}
	current.SetGroupVersionKind(obj.GroupVersionKind())
	err := c.Get(ctx, client.ObjectKeyFromObject(obj), current)
	if apierrors.IsNotFound(err) {
		return c.Create(ctx, obj)
	} else if err != nil {
		return err
	}
	current.Object["webhooks"] = obj.Object["webhooks"]
	return c.Update(ctx, current)
}

// Configurations parses controller-gen's webhook manifests and returns them
// renamed with NamePrefix and rewritten to call baseURL+path.
func Configurations(manifests []byte, baseURL string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(manifests), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("reading webhook manifests: %w", err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if k := obj.GetKind(); k != "ValidatingWebhookConfiguration" && k != "MutatingWebhookConfiguration" {
			return nil, fmt.Errorf("unexpected kind %q in webhook manifests", k)
		}
		obj.SetName(NamePrefix + obj.GetName())
		webhooks, _, err := unstructured.NestedSlice(obj.Object, "webhooks")
		if err != nil {
			return nil, fmt.Errorf("%s: %w", obj.GetName(), err)
		}
		for i, w := range webhooks {
			hook, ok := w.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("%s: webhooks[%d] is not an object", obj.GetName(), i)
			}
			path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path")
			hook["clientConfig"] = map[string]any{urlField: baseURL + path}
		}
		if err := unstructured.SetNestedSlice(obj.Object, webhooks, "webhooks"); err != nil {
			return nil, err
		}
		out = append(out, obj)
	}
}
