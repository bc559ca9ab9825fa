package main

import (
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	debugv1beta1 "github.com/deckhand-dev/deckhand/api/debug/v1beta1"
)

func TestColourLevels(t *testing.T) {
	tests := map[string]struct {
		encoder  string
		terminal bool
		noColor  string
		want     bool
	}{
		"console on a terminal":       {"console", true, "", true},
		"console into a file or pipe": {"console", false, "", false},
		"JSON on a terminal":          {"json", true, "", false},
		"NO_COLOR set":                {"console", true, "1", false},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			if got := colourLevels(tt.encoder, tt.terminal, tt.noColor); got != tt.want {
				t.Errorf("colourLevels = %v, want %v", got, tt.want)
			}
		})
	}
}

// runCommand is the manager command `make run` would start with the given
// make variables. None of run's prerequisites is made: a unit test builds no
// image, kubelet or control plane (on a machine with an empty build cache
// those took longer than go test's timeout).
func runCommand(t *testing.T, vars ...string) []string {
	t.Helper()
	prereqs := runPrerequisites(t)
	args := make([]string, 0, 5+2*len(prereqs)+len(vars))
	args = append(args, "-s", "--no-print-directory", "-C", filepath.Join("..", ".."))
	for _, prereq := range prereqs {
		args = append(args, "-o", prereq)
	}
	cmd := exec.Command("make", append(append(args, "run"), vars...)...)
	cmd.Env = append(os.Environ(), "DECKHAND_RUN_PRINT=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make run: %v\n%s", err, out)
	}
	return strings.Fields(string(out))
}

// runPrerequisites lists the prerequisites of the Makefile's run target, as
// its rule line spells them.
func runPrerequisites(t *testing.T) []string {
	t.Helper()
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.Lines(string(makefile)) {
		rest, ok := strings.CutPrefix(line, "run:")
		if !ok {
			continue
		}
		rest, _, _ = strings.Cut(rest, "##")
		return strings.Fields(rest)
	}
	t.Fatal("the Makefile has no run target")
	return nil
}

// runCommand builds nothing: with run's prerequisites skipped, make's dry run
// of run shows hack/run.sh alone, not the image, node-tools or toolchain
// builds.
func TestRunCommandBuildsNothing(t *testing.T) {
	prereqs := runPrerequisites(t)
	args := make([]string, 0, 5+2*len(prereqs))
	args = append(args, "-n", "--no-print-directory", "-C", filepath.Join("..", ".."))
	for _, prereq := range prereqs {
		args = append(args, "-o", prereq)
	}
	out, err := exec.Command("make", append(args, "run")...).CombinedOutput()
	if err != nil {
		t.Fatalf("make -n run: %v\n%s", err, out)
	}
	for _, builder := range []string{"hack/images.sh", "hack/realnode.sh", "hack/k8s/build.sh", "go build"} {
		if strings.Contains(string(out), builder) {
			t.Errorf("make run with its prerequisites skipped still runs %s:\n%s", builder, out)
		}
	}
	if !strings.Contains(string(out), "hack/run.sh") {
		t.Errorf("make -n run does not run hack/run.sh:\n%s", out)
	}
}

// The seeds' spellings work: ARGS carries manager flags, ENABLE_WEBHOOKS=false
// turns the webhooks off; and `make run` logs for a person to read.
func TestMakeRunPassesTheSeedsSpellings(t *testing.T) {
	plain := runCommand(t)
	if !slices.Contains(plain, "console") || slices.Contains(plain, "--enable-webhooks=false") {
		t.Errorf("make run: %v, want console logs and webhooks on", plain)
	}
	got := runCommand(t, "ARGS=--zap-log-level=debug --controllers=podset", "ENABLE_WEBHOOKS=false")
	for _, want := range []string{"--zap-log-level=debug", "--controllers=podset", "--enable-webhooks=false"} {
		if !slices.Contains(got, want) {
			t.Errorf("make run ARGS=... ENABLE_WEBHOOKS=false: %v lacks %s", got, want)
		}
	}
}

// The PodBugger sample works on `make run` as it is: its image is on the
// allow-list `make run` gives the manager.
func TestMakeRunAllowsThePodBuggerSampleImage(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "debug_v1beta1_podbugger.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var sample debugv1beta1.PodBugger
	if err := yaml.Unmarshal(data, &sample); err != nil {
		t.Fatal(err)
	}
	args := runCommand(t)
	i := slices.Index(args, "--podbugger-allowed-images")
	if i < 0 || i+1 == len(args) {
		t.Fatalf("make run gives no --podbugger-allowed-images: %v", args)
	}
	for _, glob := range strings.Split(args[i+1], ",") {
		if ok, _ := path.Match(glob, sample.Spec.Image); ok {
			return
		}
	}
	t.Errorf("the sample's image %s is not on make run's allow-list %s", sample.Spec.Image, args[i+1])
}
