// Command release keeps Deckhand's version one everywhere and describes a
// release for krew.
//
//	go run ./hack/release check             fail unless VERSION, the chart's version and
//	                                        appVersion, its default image tag, the install's
//	                                        image tag, CHANGELOG.md and README.md agree
//	go run ./hack/release krew DIR          write DIR/deckhand.yaml, the krew manifest of the
//	                                        kubectl-deckhand archives in DIR
//
// `make verify` runs check; `make release` runs krew.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 2 && os.Args[1] == "check":
		err = check(".")
	case len(os.Args) == 3 && os.Args[1] == "krew":
		err = writeKrew(".", os.Args[2])
	default:
		err = errors.New("usage: release check | release krew DIR")
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "release: %v\n", err)
		os.Exit(1)
	}
}

var semver = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// Version reads VERSION at root.
func Version(root string) (string, error) {
	data, err := os.ReadFile(filepath.Join(root, "VERSION"))
	if err != nil {
		return "", err
	}
	v := strings.TrimSpace(string(data))
	if !semver.MatchString(v) {
		return "", fmt.Errorf("VERSION %q is not a semantic version (MAJOR.MINOR.PATCH)", v)
	}
	return v, nil
}

// check returns every place that does not say the version VERSION says.
func check(root string) error {
	v, err := Version(root)
	if err != nil {
		return err
	}
	var problems []error
	read := func(path string, into any) {
		data, err := os.ReadFile(filepath.Join(root, path))
		if err == nil {
			err = yaml.Unmarshal(data, into)
		}
		if err != nil {
			problems = append(problems, fmt.Errorf("%s: %w", path, err))
		}
	}
	var chart struct {
		Version    string `json:"version"`
		AppVersion string `json:"appVersion"`
	}
	read("charts/deckhand/Chart.yaml", &chart)
	var values struct {
		Image struct {
			Tag string `json:"tag"`
		} `json:"image"`
	}
	read("charts/deckhand/values.yaml", &values)
	var kustomization struct {
		Images []struct {
			Name   string `json:"name"`
			NewTag string `json:"newTag"`
		} `json:"images"`
	}
	read("config/manager/kustomization.yaml", &kustomization)
	want := func(where, got, want string) {
		if got != want {
			problems = append(problems, fmt.Errorf("%s is %q, VERSION says %q", where, got, want))
		}
	}
	want("charts/deckhand/Chart.yaml version", chart.Version, v)
	want("charts/deckhand/Chart.yaml appVersion", chart.AppVersion, v)
	want("charts/deckhand/values.yaml image.tag", values.Image.Tag, "v"+v)
	for _, image := range kustomization.Images {
		want("config/manager/kustomization.yaml newTag of "+image.Name, image.NewTag, "v"+v)
	}
	for path, text := range map[string]string{
		"CHANGELOG.md": "\n## " + v + "\n",
		"README.md":    "dist/release/v" + v + "/",
	} {
		data, err := os.ReadFile(filepath.Join(root, path))
		if err != nil {
			problems = append(problems, err)
		} else if !strings.Contains(string(data), text) {
			problems = append(problems, fmt.Errorf("%s does not say %q", path, strings.TrimSpace(text)))
		}
	}
	return errors.Join(problems...)
}

// writeKrew writes the krew manifest of the plugin archives in dir
// (kubectl-deckhand_<os>_<arch>.tar.gz), with their SHA-256 sums.
func writeKrew(root, dir string) error {
	v, err := Version(root)
	if err != nil {
		return err
	}
	type selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	}
	type platform struct {
		Selector selector `json:"selector"`
		URI      string   `json:"uri"`
		Sha256   string   `json:"sha256"`
		Bin      string   `json:"bin"`
	}
	archives, err := filepath.Glob(filepath.Join(dir, "kubectl-deckhand_*_*.tar.gz"))
	if err != nil {
		return err
	}
	if len(archives) == 0 {
		return fmt.Errorf("no kubectl-deckhand_<os>_<arch>.tar.gz in %s", dir)
	}
	var ps []platform
	for _, archive := range archives {
		name := filepath.Base(archive)
		goos, goarch, _ := strings.Cut(strings.TrimSuffix(strings.TrimPrefix(name, "kubectl-deckhand_"), ".tar.gz"), "_")
		sum, err := sha256File(archive)
		if err != nil {
			return err
		}
		ps = append(ps, platform{
			Selector: selector{MatchLabels: map[string]string{"os": goos, "arch": goarch}},
			URI:      fmt.Sprintf("https://github.com/deckhand-dev/deckhand/releases/download/v%s/%s", v, name),
			Sha256:   sum,
			Bin:      "kubectl-deckhand",
		})
	}
	manifest := map[string]any{
		"apiVersion": "krew.googlecontainertools.github.com/v1alpha2",
		"kind":       "Plugin",
		"metadata":   map[string]string{"name": "deckhand"},
		"spec": map[string]any{
			"version":          "v" + v,
			"homepage":         "https://github.com/deckhand-dev/deckhand",
			"shortDescription": "Explain Deckhand's objects: status, why a Job is kept, incidents, what a PodBugger would do",
			"description": "kubectl deckhand reads Deckhand's objects and explains them: every object's\n" +
				"readiness in one line, which JobWatcher reaches a Job and when it is due,\n" +
				"the PodIncidents of a pod and their logs, and what a PodBugger would inject\n" +
				"into a pod. It never writes.\n",
			"platforms": ps,
		},
	}
	data, err := yaml.Marshal(manifest)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "deckhand.yaml"), data, 0o644)
}

func sha256File(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
