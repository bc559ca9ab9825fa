// Command image builds a single-layer container image from local files and
// writes it as a docker-archive tar (what `docker load` and
// `ctr images import` read), with go-containerregistry: no Docker engine and
// no registry. The layer is reproducible: entries are sorted and carry a
// fixed time, so the same inputs give the same image ID.
//
//	go run ./image -o bin/images/deckhand.tar -tag ghcr.io/deckhand-dev/deckhand:latest \
//	    -user 65532:65532 -entrypoint /deckhand -file /deckhand=../../bin/image/deckhand
//
// Flags that take a path inside the image may repeat:
//
//	-file /in/image=/on/host   a regular file (its mode is kept)
//	-link /bin/sh=busybox      a symbolic link
//	-dir /tmp=1777             a directory with an octal mode
//	-text /etc/passwd=CONTENT  a file with the given content, mode 0644
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
)

// epoch is the time every layer entry and the image carry.
var epoch = time.Unix(0, 0).UTC()

type pairs []string

func (p *pairs) String() string     { return strings.Join(*p, ",") }
func (p *pairs) Set(v string) error { *p = append(*p, v); return nil }

type entry struct {
	hdr  tar.Header
	data []byte
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run() error {
	var files, links, dirs, texts, env pairs
	out := flag.String("o", "", "output docker-archive tar")
	tag := flag.String("tag", "", "image reference, e.g. ghcr.io/deckhand-dev/deckhand:latest")
	user := flag.String("user", "", "user[:group] the image runs as")
	entrypoint := flag.String("entrypoint", "", "entrypoint, space separated")
	cmd := flag.String("cmd", "", "default arguments, space separated")
	workdir := flag.String("workdir", "/", "working directory")
	flag.Var(&files, "file", "IMAGEPATH=HOSTPATH, repeatable")
	flag.Var(&links, "link", "IMAGEPATH=TARGET, repeatable")
	flag.Var(&dirs, "dir", "IMAGEPATH=OCTALMODE, repeatable")
	flag.Var(&texts, "text", "IMAGEPATH=CONTENT, repeatable")
	flag.Var(&env, "env", "NAME=VALUE, repeatable")
	flag.Parse()
	if *out == "" || *tag == "" {
		return errors.New("-o and -tag are required")
	}
	ref, err := name.NewTag(*tag)
	if err != nil {
		return fmt.Errorf("-tag: %w", err)
	}
	entries, err := collect(files, links, dirs, texts)
	if err != nil {
		return err
	}
	layerTar, err := writeLayer(entries)
	if err != nil {
		return err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return fmt.Errorf("making the layer: %w", err)
	}
	img, err := mutate.Append(empty.Image, mutate.Addendum{Layer: layer, History: v1.History{
		Created: v1.Time{Time: epoch}, CreatedBy: "hack/k8s/image", Comment: "files from the local machine",
	}})
	if err != nil {
		return fmt.Errorf("appending the layer: %w", err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.Architecture, cfg.OS, cfg.Created = "amd64", "linux", v1.Time{Time: epoch}
	cfg.Config.User = *user
	cfg.Config.WorkingDir = *workdir
	cfg.Config.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin"}, env...)
	cfg.Config.Entrypoint = strings.Fields(*entrypoint)
	cfg.Config.Cmd = strings.Fields(*cmd)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return fmt.Errorf("setting the configuration: %w", err)
	}
	if err := tarball.WriteToFile(*out, ref, img); err != nil {
		return fmt.Errorf("writing %s: %w", *out, err)
	}
	digest, err := img.ConfigName()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "wrote %s (%s, id %s)\n", *out, ref, digest.Hex[:12])
	return nil
}

// collect turns the flags into tar entries, with every parent directory.
func collect(files, links, dirs, texts pairs) ([]entry, error) {
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
		add(entry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: dst, Mode: int64(st.Mode().Perm()), Size: int64(len(data))}, data: data})
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
