package main

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// The tests build a real Go program (this command, which links
// go-containerregistry and its dependencies) for linux/amd64 and
// linux/arm64 the way hack/images.sh builds the manager, and make images
// of it as hack/images.sh does.
const (
	testRef   = "localhost/deckhand/imagetest:v1"
	testEpoch = "1767225600" // 2026-01-01T00:00:00Z
)

var platforms = []string{"linux/amd64", "linux/arm64"}

// crossBuild compiles this package for each platform into dir/OS-ARCH/tool.
func crossBuild(t *testing.T, dir string) {
	t.Helper()
	for _, p := range platforms {
		goos, arch, _ := strings.Cut(p, "/")
		cmd := exec.Command("go", "build", "-trimpath", "-buildvcs=false", "-ldflags", "-s -w", "-o", filepath.Join(dir, goos+"-"+arch, "tool"), ".")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build for %s: %v\n%s", p, err, out)
		}
	}
}

// buildArchive builds the binaries into a fresh directory and an OCI
// archive of them; it returns the archive's path and the binaries' folder.
func buildArchive(t *testing.T, mode os.FileMode) (archive, bins string) {
	t.Helper()
	dir := t.TempDir()
	bins = filepath.Join(dir, "bin")
	crossBuild(t, bins)
	for _, p := range platforms {
		if err := os.Chmod(filepath.Join(bins, strings.ReplaceAll(p, "/", "-"), "tool"), mode); err != nil {
			t.Fatal(err)
		}
	}
	archive = filepath.Join(dir, "out", "tool.tar")
	if err := os.MkdirAll(filepath.Dir(archive), 0o755); err != nil {
		t.Fatal(err)
	}
	args := make([]string, 0, 32)
	args = append(args, "-o", archive, "-tag", testRef, "-format", "oci", "-sbom", "/tool",
		"-user", "65532:65532", "-entrypoint", "/tool", "-dir", "/tmp=1777",
		"-file", "/tool="+filepath.Join(bins, "{os}-{arch}", "tool"))
	for _, p := range platforms {
		args = append(args, "-platform", p)
	}
	env := func(k string) string {
		if k == "SOURCE_DATE_EPOCH" {
			return testEpoch
		}
		return ""
	}
	if err := run(args, env, io.Discard); err != nil {
		t.Fatalf("image %s: %v", strings.Join(args, " "), err)
	}
	return archive, bins
}

// ociArchive is an OCI archive read back: its files by name.
type ociArchive map[string][]byte

func readArchive(t *testing.T, path string) ociArchive {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	files := ociArchive{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(epochTime()) {
			t.Errorf("archive entry %s: uid %d gid %d time %s, want 0 0 %s", hdr.Name, hdr.Uid, hdr.Gid, hdr.ModTime, epochTime())
		}
		data, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		files[hdr.Name] = data
	}
}

func epochTime() time.Time { return time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC) }

func (a ociArchive) blob(t *testing.T, h v1.Hash, into any) []byte {
	t.Helper()
	data, ok := a["blobs/sha256/"+h.Hex]
	if !ok {
		t.Fatalf("blob %s missing from the archive", h)
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != h.Hex {
		t.Fatalf("blob %s holds content of digest %x", h, sum)
	}
	if into != nil {
		if err := json.Unmarshal(data, into); err != nil {
			t.Fatalf("blob %s: %v", h, err)
		}
	}
	return data
}

// index returns the image index index.json names, and its digest.
func (a ociArchive) index(t *testing.T) (v1.IndexManifest, v1.Hash) {
	t.Helper()
	var top v1.IndexManifest
	if err := json.Unmarshal(a["index.json"], &top); err != nil {
		t.Fatalf("index.json: %v", err)
	}
	if len(top.Manifests) != 1 {
		t.Fatalf("index.json names %d manifests, want the one image index", len(top.Manifests))
	}
	d := top.Manifests[0]
	if d.Annotations[annotationImageName] != testRef || d.Annotations[annotationRefName] != "v1" {
		t.Errorf("index.json annotations %v: want %s=%s (what ctr images import names the image by)", d.Annotations, annotationImageName, testRef)
	}
	var idx v1.IndexManifest
	a.blob(t, d.Digest, &idx)
	return idx, d.Digest
}

// The archive is an image index with one image per platform; each image's
// config says its OS and architecture, and its binary is an ELF file for
// that machine, executable, owned by root, dated SOURCE_DATE_EPOCH.
func TestImageIndexHasEveryPlatform(t *testing.T) {
	archive, _ := buildArchive(t, 0o755)
	a := readArchive(t, archive)
	if string(a["oci-layout"]) != `{"imageLayoutVersion":"1.0.0"}` {
		t.Errorf("oci-layout = %q", a["oci-layout"])
	}
	idx, _ := a.index(t)
	if len(idx.Manifests) != len(platforms) {
		t.Fatalf("the index lists %d images, want %d", len(idx.Manifests), len(platforms))
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	for i, p := range platforms {
		goos, arch, _ := strings.Cut(p, "/")
		d := idx.Manifests[i]
		if d.Platform == nil || d.Platform.OS != goos || d.Platform.Architecture != arch {
			t.Errorf("index entry %d: platform %+v, want %s", i, d.Platform, p)
			continue
		}
		var m v1.Manifest
		a.blob(t, d.Digest, &m)
		var cfg v1.ConfigFile
		a.blob(t, m.Config.Digest, &cfg)
		if cfg.OS != goos || cfg.Architecture != arch {
			t.Errorf("%s: config says %s/%s", p, cfg.OS, cfg.Architecture)
		}
		if !cfg.Created.Equal(epochTime()) || cfg.Config.User != "65532:65532" || strings.Join(cfg.Config.Entrypoint, " ") != "/tool" {
			t.Errorf("%s: config created %s user %q entrypoint %v", p, cfg.Created.Time, cfg.Config.User, cfg.Config.Entrypoint)
		}
		if len(m.Layers) != 1 {
			t.Fatalf("%s: %d layers, want 1", p, len(m.Layers))
		}
		hdr, data := layerFile(t, a.blob(t, m.Layers[0].Digest, nil), "tool")
		if hdr.Mode != 0o755 || hdr.Uid != 0 || hdr.Gid != 0 || !hdr.ModTime.Equal(epochTime()) {
			t.Errorf("%s: /tool mode %o uid %d gid %d time %s", p, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime)
		}
		f, err := elf.NewFile(bytes.NewReader(data))
		if err != nil {
			t.Fatalf("%s: /tool is not ELF: %v", p, err)
		}
		if f.Machine != machines[arch] {
			t.Errorf("%s: /tool is built for %s", p, f.Machine)
		}
	}
}

// Two builds, each compiling the binaries again into another directory with
// another file mode (a umask of 002 against 022), give byte-identical
// archives and so one index digest.
func TestImageIsReproducible(t *testing.T) {
	first, _ := buildArchive(t, 0o755)
	second, _ := buildArchive(t, 0o775)
	a, b := readArchive(t, first), readArchive(t, second)
	_, da := a.index(t)
	_, db := b.index(t)
	if da != db {
		t.Errorf("two builds give index digests %s and %s", da, db)
	}
	ra, _ := os.ReadFile(first)
	rb, _ := os.ReadFile(second)
	if !bytes.Equal(ra, rb) {
		t.Errorf("two builds give different archives (%d and %d bytes)", len(ra), len(rb))
	}
}

func layerFile(t *testing.T, gz []byte, name string) (*tar.Header, []byte) {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatalf("gunzip the layer: %v", err)
	}
	tr := tar.NewReader(zr)
	for {
		hdr, err := tr.Next()
		if err != nil {
			t.Fatalf("no %s in the layer: %v", name, err)
		}
		if hdr.Name == name {
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return hdr, data
		}
	}
}

// The SBOM beside the archive lists, for each platform, exactly the modules
// `go version -m` shows for that binary, with their versions, plus the main
// module and the Go standard library, and names the binary by its SHA-256.
func TestSBOMListsTheBinarysModules(t *testing.T) {
	archive, bins := buildArchive(t, 0o755)
	for _, p := range platforms {
		bin := filepath.Join(bins, strings.ReplaceAll(p, "/", "-"), "tool")
		want := goVersionM(t, bin)
		if len(want) < 5 {
			t.Fatalf("go version -m %s lists only %v: the test binary should link modules", bin, want)
		}
		raw, err := os.ReadFile(sbomPath(archive, p))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		var doc spdxDocument
		if err := json.Unmarshal(raw, &doc); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if doc.SPDXVersion != "SPDX-2.3" || doc.CreationInfo.Created != "2026-01-01T00:00:00Z" {
			t.Errorf("%s: spdxVersion %q created %q", p, doc.SPDXVersion, doc.CreationInfo.Created)
		}
		got := map[string]string{}
		for _, pkg := range doc.Packages {
			got[pkg.Name] = pkg.VersionInfo
		}
		goVersion := want["go"]
		delete(want, "go")
		if got["stdlib"] != goVersion {
			t.Errorf("%s: stdlib %q, want %q", p, got["stdlib"], goVersion)
		}
		delete(got, "stdlib")
		for path, version := range want {
			if got[path] != version {
				t.Errorf("%s: the SBOM has %s at %q, go version -m says %q", p, path, got[path], version)
			}
		}
		for path := range got {
			if _, ok := want[path]; !ok {
				t.Errorf("%s: the SBOM lists %s, which go version -m does not", p, path)
			}
		}
		data, _ := os.ReadFile(bin)
		sum := sha256.Sum256(data)
		if len(doc.Files) != 1 || doc.Files[0].FileName != "/tool" || doc.Files[0].Checksums[0].ChecksumValue != hex.EncodeToString(sum[:]) {
			t.Errorf("%s: files %+v, want /tool with SHA256 %x", p, doc.Files, sum)
		}
	}
}

// goVersionM runs `go version -m` and returns module path -> version for
// the main module and every dependency (a replaced one by its
// replacement), and "go" -> the toolchain version.
func goVersionM(t *testing.T, bin string) map[string]string {
	t.Helper()
	out, err := exec.Command("go", "version", "-m", bin).Output()
	if err != nil {
		t.Fatalf("go version -m: %v", err)
	}
	mods := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	first, last := true, ""
	for sc.Scan() {
		f := strings.Split(strings.TrimSpace(sc.Text()), "\t")
		switch {
		case first:
			fields := strings.Fields(sc.Text())
			mods["go"] = fields[len(fields)-1]
			first = false
		case f[0] == "mod" || f[0] == "dep":
			version := ""
			if len(f) > 2 {
				version = f[2]
			}
			mods[f[1]], last = version, f[1]
		case f[0] == "=>":
			delete(mods, last)
			version := ""
			if len(f) > 2 {
				version = f[2]
			}
			mods[f[1]] = version
		}
	}
	return mods
}

func TestContainerdName(t *testing.T) {
	tests := map[string]string{
		"localhost/deckhand/pause:v1":        "localhost/deckhand/pause:v1",
		"ghcr.io/deckhand-dev/deckhand:v0.4": "ghcr.io/deckhand-dev/deckhand:v0.4",
		"registry:5000/deckhand:v1":          "registry:5000/deckhand:v1",
		"deckhand:latest":                    "docker.io/library/deckhand:latest",
		"deckhand-dev/deckhand:v1":           "docker.io/deckhand-dev/deckhand:v1",
	}
	for in, want := range tests {
		if got := containerdName(in); got != want {
			t.Errorf("containerdName(%q) = %q, want %q", in, got, want)
		}
	}
}
