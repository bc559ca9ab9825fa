// Command newkind scaffolds a new Deckhand kind in the shape
// docs/development/architecture.md describes, so that adding one starts
// from a kind that builds, registers itself and passes its own tests:
//
//	go run ./hack/newkind [-webhook] KIND GROUP VERSION     e.g. go run ./hack/newkind Gadget widget v1
//
// It writes only new files, and refuses to overwrite one: the API types
// (and groupversion_info.go for a new group version), the controller
// package internal/controller/<kind> (reconciler, pure status and health,
// cache needs, metrics, an envtest test and a unit test of the status), its
// registry entry internal/manager/controller_<kind>.go, the sample, the
// editor and viewer roles, the guide, the GitOps health test, the fault
// scenario and second-writer case, and the e2e test; with -webhook, a
// validating webhook internal/webhook/<group>/<version>/<kind>_webhook.go
// (refusing forged reviews, with a pure Validate<Kind> for the rules the
// schema cannot say) and its test, named in the registry entry. The one file it
// changes is PROJECT, kubebuilder's record of the resources, to which it
// appends the kind. Then `make manifests generate` writes the CRD, deepcopy,
// RBAC, the kustomizations, the chart's copies and the reference pages.
package main

import (
	"bytes"
	"embed"
	"errors"
	"flag"
	"fmt"
	"go/format"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"text/template"
	"unicode"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

//go:embed templates/*.tmpl
var templates embed.FS

func main() {
	webhook := flag.Bool("webhook", false, "also scaffold a validating webhook, for rules the schema cannot express")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: go run ./hack/newkind [-webhook] KIND GROUP VERSION   (e.g. Gadget widget v1)")
	}
	flag.Parse()
	if flag.NArg() != 3 {
		flag.Usage()
		os.Exit(2)
	}
	k, err := newKind(flag.Arg(0), flag.Arg(1), flag.Arg(2))
	k.Webhook = *webhook
	if err == nil {
		var written []string
		written, err = scaffold(".", k)
		for _, f := range written {
			fmt.Println(f)
		}
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "newkind: %v\n", err)
		os.Exit(1)
	}
}

// kind is what the templates are filled with.
type kind struct {
	Kind      string // Gadget
	Lower     string // gadget: the controller package and --controllers name
	Plural    string // gadgets
	Short     string // the short name
	Group     string // widget
	FullGroup string // widget.deckhand.dev
	Version   string // v1
	APIAlias  string // widgetv1
	APIPkg    string // github.com/deckhand-dev/deckhand/api/widget/v1
	// NewGroupVersion is true when api/<group>/<version> does not exist yet.
	NewGroupVersion bool
	// Webhook asks for a validating webhook; WebhookSetup is its setup
	// function's name (Setup, or Setup<Kind> beside another kind's webhook
	// package) and WebhookPath the path it is served on.
	Webhook                   bool
	WebhookSetup, WebhookPath string
}

const (
	module = "github.com/deckhand-dev/deckhand"
	domain = "deckhand.dev"
)

var (
	kindName    = regexp.MustCompile(`^[A-Z][a-zA-Z0-9]{2,39}$`)
	groupName   = regexp.MustCompile(`^[a-z][a-z0-9]{1,19}$`)
	versionName = regexp.MustCompile(`^v[1-9][0-9]*((alpha|beta)[1-9][0-9]*)?$`)
)

func newKind(name, group, version string) (kind, error) {
	var errs []error
	if !kindName.MatchString(name) {
		errs = append(errs, fmt.Errorf("kind %q: want UpperCamelCase letters and digits, 3 to 40 of them", name))
	}
	if !groupName.MatchString(group) {
		errs = append(errs, fmt.Errorf("group %q: want lower-case letters and digits (the %s suffix is added)", group, domain))
	}
	if !versionName.MatchString(version) {
		errs = append(errs, fmt.Errorf("version %q: want one like v1, v1alpha1 or v2beta3", version))
	}
	if len(errs) > 0 {
		return kind{}, errors.Join(errs...)
	}
	plural, _ := meta.UnsafeGuessKindToResource(schema.GroupVersionKind{Kind: name})
	return kind{
		Kind: name, Lower: strings.ToLower(name), Plural: plural.Resource, Short: shortName(name),
		Group: group, FullGroup: group + "." + domain, Version: version,
		APIAlias: apiAlias(group, version), APIPkg: module + "/api/" + group + "/" + version,
	}, nil
}

// apiAlias is the import alias .golangci.yml asks of an API package: group
// and version, deckhandbatchv1 beside Kubernetes' batchv1.
func apiAlias(group, version string) string {
	if group == "batch" && version == "v1" {
		return "deckhandbatchv1"
	}
	return group + version
}

// shortName is the kind's capitals, lower-cased (PodBugger: pb), or its
// first two letters when it has one capital (Gadget: ga).
func shortName(kind string) string {
	var b strings.Builder
	for _, r := range kind {
		if unicode.IsUpper(r) {
			b.WriteRune(unicode.ToLower(r))
		}
	}
	if b.Len() < 2 {
		return strings.ToLower(kind[:2])
	}
	return b.String()
}

// file is one template and where it goes; paths are templates too.
type file struct{ template, path string }

var files = []file{
	{"types.go.tmpl", "api/{{.Group}}/{{.Version}}/{{.Lower}}_types.go"},
	{"controller.go.tmpl", "internal/controller/{{.Lower}}/{{.Lower}}_controller.go"},
	{"status.go.tmpl", "internal/controller/{{.Lower}}/{{.Lower}}_status.go"},
	{"health.go.tmpl", "internal/controller/{{.Lower}}/{{.Lower}}_health.go"},
	{"cache.go.tmpl", "internal/controller/{{.Lower}}/{{.Lower}}_cache.go"},
	{"metrics.go.tmpl", "internal/controller/{{.Lower}}/metrics.go"},
	{"suite_test.go.tmpl", "internal/controller/{{.Lower}}/suite_test.go"},
	{"status_test.go.tmpl", "internal/controller/{{.Lower}}/{{.Lower}}_status_test.go"},
	{"controller_test.go.tmpl", "internal/controller/{{.Lower}}/{{.Lower}}_controller_test.go"},
	{"registry.go.tmpl", "internal/manager/controller_{{.Lower}}.go"},
	{"sample.yaml.tmpl", "config/samples/{{.Group}}_{{.Version}}_{{.Lower}}.yaml"},
	{"editor_role.yaml.tmpl", "config/rbac/{{.Lower}}_editor_role.yaml"},
	{"viewer_role.yaml.tmpl", "config/rbac/{{.Lower}}_viewer_role.yaml"},
	{"guide.md.tmpl", "docs/guides/{{.Lower}}.md"},
	{"gitops_test.go.tmpl", "test/gitops/{{.Lower}}_test.go"},
	{"faults_test.go.tmpl", "test/faults/{{.Lower}}_test.go"},
	{"e2e_test.go.tmpl", "test/e2e/{{.Lower}}_test.go"},
}

// groupVersionFile is written only for a new group version.
var groupVersionFile = file{"groupversion_info.go.tmpl", "api/{{.Group}}/{{.Version}}/groupversion_info.go"}

// webhookFiles are written with -webhook.
var webhookFiles = []file{
	{"webhook.go.tmpl", "internal/webhook/{{.Group}}/{{.Version}}/{{.Lower}}_webhook.go"},
	{"webhook_test.go.tmpl", "internal/webhook/{{.Group}}/{{.Version}}/{{.Lower}}_webhook_test.go"},
}

// scaffold writes the kind's files under root and appends it to PROJECT;
// it returns the paths written. It writes nothing when one of the files
// exists already, or when PROJECT knows the kind.
func scaffold(root string, k kind) ([]string, error) {
	project, err := os.ReadFile(filepath.Join(root, "PROJECT"))
	if err != nil {
		return nil, err
	}
	if strings.Contains(string(project), "kind: "+k.Kind+"\n") {
		return nil, fmt.Errorf("PROJECT has a kind %s already", k.Kind)
	}
	todo := slices.Clone(files)
	if _, err := os.Stat(filepath.Join(root, "api", k.Group, k.Version)); errors.Is(err, os.ErrNotExist) {
		k.NewGroupVersion = true
		todo = append([]file{groupVersionFile}, todo...)
	}
	if k.Webhook {
		k.WebhookSetup, k.WebhookPath = "Setup", "/validate-"+k.Group+"-deckhand-dev-"+k.Version+"-"+k.Lower
		if _, err := os.Stat(filepath.Join(root, "internal", "webhook", k.Group, k.Version)); err == nil {
			k.WebhookSetup += k.Kind
		}
		todo = append(todo, webhookFiles...)
	}
	out := map[string][]byte{}
	var order []string
	for _, f := range todo {
		p, err := fill(f.path, f.path, k)
		if err != nil {
			return nil, err
		}
		path := string(p)
		body, err := templates.ReadFile("templates/" + f.template)
		if err != nil {
			return nil, err
		}
		data, err := fill(f.template, string(body), k)
		if err != nil {
			return nil, err
		}
		if strings.HasSuffix(path, ".go") {
			formatted, err := format.Source(data)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", path, err)
			}
			data = formatted
		}
		if _, err := os.Stat(filepath.Join(root, path)); err == nil {
			return nil, fmt.Errorf("%s exists already: newkind writes only new files", path)
		}
		out[path] = data
		order = append(order, path)
	}
	for _, path := range order {
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(full, out[path], 0o644); err != nil {
			return nil, err
		}
	}
	entry, err := fill("PROJECT", projectEntry, k)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(root, "PROJECT"), append(project, entry...), 0o644); err != nil {
		return nil, err
	}
	return append(order, "PROJECT"), nil
}

// projectEntry is the kind's resource in PROJECT, as kubebuilder writes one.
const projectEntry = `- api:
    crdVersion: v1
    namespaced: true
  controller: true
  domain: ` + domain + `
  group: {{.Group}}
  kind: {{.Kind}}
  path: {{.APIPkg}}
  version: {{.Version}}
`

func fill(name, text string, k kind) ([]byte, error) {
	t, err := template.New(name).Parse(text)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	var b bytes.Buffer
	if err := t.Execute(&b, k); err != nil {
		return nil, fmt.Errorf("template %s: %w", name, err)
	}
	return b.Bytes(), nil
}
