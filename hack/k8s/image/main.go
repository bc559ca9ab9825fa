// Command image builds a single-layer container image from local files with
// go-containerregistry: no Docker engine and no registry. It writes either a
// docker-archive tar (one platform; what `docker load` and
// `ctr images import` read) or an OCI image-layout archive holding an image
// index with one image per -platform (what `ctr images import`, `docker load`
// of Docker 25+, `crane push` and `skopeo copy oci-archive:` read).
//
// The output is reproducible: layer entries are sorted, carry uid/gid 0, the
// time SOURCE_DATE_EPOCH (seconds; 0 when unset) and a mode that depends only
// on whether the host file is executable (0755) or not (0644), so the host's
// umask does not leak in; configs carry the same time; the OCI archive's own
// entries are sorted with fixed modes and times. The same inputs and
// SOURCE_DATE_EPOCH give the same bytes, hence the same index digest.
//
//	go run ./image -o bin/images/deckhand.tar -tag ghcr.io/deckhand-dev/deckhand:latest -format oci \
//	    -platform linux/amd64 -platform linux/arm64 -sbom /deckhand \
//	    -user 65532:65532 -entrypoint /deckhand -file '/deckhand=../../bin/image/{os}-{arch}/deckhand'
//
// Flags that take a path inside the image may repeat:
//
//	-file /in/image=/on/host   a regular file; {os} and {arch} in the host path
//	                           name the platform being built
//	-link /bin/sh=busybox      a symbolic link
//	-dir /tmp=1777             a directory with an octal mode
//	-text /etc/passwd=CONTENT  a file with the given content, mode 0644
//
// -sbom /in/image names a Go binary among the files: for each platform an
// SPDX 2.3 JSON document listing the modules it was built from (its
// debug/buildinfo, what `go version -m` prints) is written beside the output,
// as OUT-without-.tar.OS-ARCH.spdx.json.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

type pairs []string

func (p *pairs) String() string     { return strings.Join(*p, ",") }
func (p *pairs) Set(v string) error { *p = append(*p, v); return nil }

type entry struct {
	hdr  tar.Header
	data []byte
}

// options are the parsed flags.
type options struct {
	out, tag, format, user, entrypoint, cmd, workdir, sbom string
	files, links, dirs, texts, env, platforms              pairs
	epoch                                                  time.Time
}

func main() {
	if err := run(os.Args[1:], os.Getenv, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(args []string, getenv func(string) string, log io.Writer) error {
	o, err := parse(args, getenv)
	if err != nil {
		return err
	}
	ref, err := name.NewTag(o.tag)
	if err != nil {
		return fmt.Errorf("-tag: %w", err)
	}
	var images []platformImage
	for _, p := range o.platforms {
		img, err := buildImage(o, p)
		if err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		images = append(images, img)
	}
	if o.format == "docker" {
		if err := tarball.WriteToFile(o.out, ref, images[0].img); err != nil {
			return fmt.Errorf("writing %s: %w", o.out, err)
		}
		id, err := images[0].img.ConfigName()
		if err != nil {
			return err
		}
		_, _ = fmt.Fprintf(log, "wrote %s (%s, id %s)\n", o.out, ref, id.Hex[:12])
	} else {
		digest, err := writeOCIArchive(o.out, ref, o.epoch, images)
		if err != nil {
			return fmt.Errorf("writing %s: %w", o.out, err)
		}
		_, _ = fmt.Fprintf(log, "wrote %s (%s@%s, %s)\n", o.out, ref, digest, strings.Join(o.platforms, ", "))
	}
	if o.sbom == "" {
		return nil
	}
	for _, img := range images {
		file := sbomPath(o.out, img.platform)
		if err := writeSBOM(file, img, o.sbom, o.epoch); err != nil {
			return fmt.Errorf("-sbom %s (%s): %w", o.sbom, img.platform, err)
		}
		_, _ = fmt.Fprintf(log, "wrote %s\n", file)
	}
	return nil
}

func parse(args []string, getenv func(string) string) (options, error) {
	var o options
	fs := flag.NewFlagSet("image", flag.ContinueOnError)
	fs.StringVar(&o.out, "o", "", "output tar")
	fs.StringVar(&o.tag, "tag", "", "image reference, e.g. ghcr.io/deckhand-dev/deckhand:latest")
	fs.StringVar(&o.format, "format", "docker", "docker (docker-archive, one platform) or oci (OCI layout archive with an image index)")
	fs.StringVar(&o.user, "user", "", "user[:group] the image runs as")
	fs.StringVar(&o.entrypoint, "entrypoint", "", "entrypoint, space separated")
	fs.StringVar(&o.cmd, "cmd", "", "default arguments, space separated")
	fs.StringVar(&o.workdir, "workdir", "/", "working directory")
	fs.StringVar(&o.sbom, "sbom", "", "IMAGEPATH of a Go binary to write an SPDX SBOM of, per platform")
	fs.Var(&o.platforms, "platform", "OS/ARCH, repeatable (default linux/amd64)")
	fs.Var(&o.files, "file", "IMAGEPATH=HOSTPATH, repeatable; {os} and {arch} in HOSTPATH are replaced")
	fs.Var(&o.links, "link", "IMAGEPATH=TARGET, repeatable")
	fs.Var(&o.dirs, "dir", "IMAGEPATH=OCTALMODE, repeatable")
	fs.Var(&o.texts, "text", "IMAGEPATH=CONTENT, repeatable")
	fs.Var(&o.env, "env", "NAME=VALUE, repeatable")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.out == "" || o.tag == "" {
		return o, errors.New("-o and -tag are required")
	}
	if len(o.platforms) == 0 {
		o.platforms = pairs{"linux/amd64"}
	}
	for _, p := range o.platforms {
		if goos, arch, ok := strings.Cut(p, "/"); !ok || goos == "" || arch == "" || strings.Contains(arch, "/") {
			return o, fmt.Errorf("-platform %q: want OS/ARCH", p)
		}
	}
	switch o.format {
	case "oci":
	case "docker":
		if len(o.platforms) != 1 {
			return o, errors.New("-format docker holds one platform: use -format oci for several")
		}
	default:
		return o, fmt.Errorf("-format %q: want docker or oci", o.format)
	}
	o.epoch = time.Unix(0, 0).UTC()
	if s := getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil || sec < 0 {
			return o, fmt.Errorf("SOURCE_DATE_EPOCH %q: want seconds since 1970", s)
		}
		o.epoch = time.Unix(sec, 0).UTC()
	}
	return o, nil
}

// platformImage is one platform's image and the files it was built from.
type platformImage struct {
	platform string
	img      v1.Image
	files    map[string][]byte // image path (no leading slash) -> content
}

func buildImage(o options, platform string) (platformImage, error) {
	goos, arch, _ := strings.Cut(platform, "/")
	files := make(pairs, 0, len(o.files))
	for _, f := range o.files {
		files = append(files, strings.NewReplacer("{os}", goos, "{arch}", arch).Replace(f))
	}
	entries, err := collect(files, o.links, o.dirs, o.texts, o.epoch)
	if err != nil {
		return platformImage{}, err
	}
	layerTar, err := writeLayer(entries)
	if err != nil {
		return platformImage{}, err
	}
	layerType, base := types.DockerLayer, empty.Image
	if o.format == "oci" {
		layerType, base = types.OCILayer, mutate.MediaType(mutate.ConfigMediaType(empty.Image, types.OCIConfigJSON), types.OCIManifestSchema1)
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(layerType))
	if err != nil {
		return platformImage{}, fmt.Errorf("making the layer: %w", err)
	}
	img, err := mutate.Append(base, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: o.epoch}, CreatedBy: "hack/k8s/image", Comment: "files from the local machine",
	}})
	if err != nil {
		return platformImage{}, fmt.Errorf("appending the layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return platformImage{}, err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS, cfg.Created = arch, goos, v1.Time{Time: o.epoch}
	cfg.Config.User = o.user
	cfg.Config.WorkingDir = o.workdir
	cfg.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}, o.env...)
	cfg.Config.Entrypoint = strings.Fields(o.entrypoint)
	cfg.Config.Cmd = strings.Fields(o.cmd)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return platformImage{}, fmt.Errorf("setting the configuration: %w", err)
	}
	byPath := map[string][]byte{}
	for _, e := range entries {
		if e.hdr.Typeflag == tar.TypeReg {
			byPath[e.hdr.Name] = e.data
		}
	}
	return platformImage{platform: platform, img: img, files: byPath}, nil
}

// collect turns the flags into tar entries, with every parent directory,
// sorted by path, owned by 0:0 and dated epoch.
func collect(files, links, dirs, texts pairs, epoch time.Time) ([]entry, error) {
	byPath := map[string]entry{}
	add := func(e entry) {
		e.hdr.Name = strings.TrimPrefix(path.Clean("/"+e.hdr.Name), "/")
		e.hdr.ModTime, e.hdr.Format = epoch, tar.FormatPAX
		for dir := path.Dir(e.hdr.Name); dir != "." && dir != "/"; dir = path.Dir(dir) {
			if _, ok := byPath[dir]; !ok {
				byPath[dir] = entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: dir + "/", Mode: 0o755, ModTime: epoch, Format: tar.FormatPAX}}
			}
		}
		if e.hdr.Typeflag == tar.TypeDir {
			e.hdr.Name += "/"
		}
		byPath[strings.TrimSuffix(e.hdr.Name, "/")] = e
	}
	for _, f := range files {
		dst, src, ok := strings.Cut(f, "=")
		if !ok {
			return nil, fmt.Errorf("-file %q: want IMAGEPATH=HOSTPATH", f)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("-file %s: %w", dst, err)
		}
		st, err := os.Stat(src)
		if err != nil {
			return nil, err
		}
		// Only "executable or not" is kept: a umask of 002 or 022 on the
		// machine that built the file must not change the image.
		mode := int64(0o644)
		if st.Mode().Perm()&0o111 != 0 {
			mode = 0o755
		}
		add(entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: dst, Mode: mode, Size: int64(len(data))}, data: data})
	}
	for _, l := range links {
		dst, target, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("-link %q: want IMAGEPATH=TARGET", l)
		}
		add(entry{hdr: tar.Header{Typeflag: tar.TypeSymlink, Name: dst, Linkname: target, Mode: 0o777}})
	}
	for _, d := range dirs {
		dst, mode, ok := strings.Cut(d, "=")
		m, err := strconv.ParseInt(mode, 8, 32)
		if !ok || err != nil {
			return nil, fmt.Errorf("-dir %q: want IMAGEPATH=OCTALMODE", d)
		}
		add(entry{hdr: tar.Header{Typeflag: tar.TypeDir, Name: dst, Mode: m}})
	}
	for _, t := range texts {
		dst, content, ok := strings.Cut(t, "=")
		if !ok {
			return nil, fmt.Errorf("-text %q: want IMAGEPATH=CONTENT", t)
		}
		add(entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: dst, Mode: 0o644, Size: int64(len(content))}, data: []byte(content)})
	}
	keys := make([]string, 0, len(byPath))
	for k := range byPath {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]entry, 0, len(keys))
	for _, k := range keys {
		out = append(out, byPath[k])
	}
	return out, nil
}

func writeLayer(entries []entry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		if err := tw.WriteHeader(&e.hdr); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.hdr.Name, err)
		}
		if _, err := tw.Write(e.data); err != nil {
			return nil, fmt.Errorf("layer entry %s: %w", e.hdr.Name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
