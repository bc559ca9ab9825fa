package main

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// The annotations containerd (`ctr images import`), Docker (`docker load`)
// and BuildKit's OCI exporter use to name an image in an OCI layout.
const (
	annotationImageName = "io.containerd.image.name"
	annotationRefName   = "org.opencontainers.image.ref.name"
)

// writeOCIArchive writes an OCI image layout as a tar: oci-layout,
// index.json naming one image index (ref) with a manifest per platform, and
// blobs/sha256/*. It returns the image index's digest, which is what a
// registry shows for the pushed image.
func writeOCIArchive(out string, ref name.Tag, epoch time.Time, images []platformImage) (v1.Hash, error) {
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	blobs := map[v1.Hash][]byte{}
	for _, pi := range images {
		goos, arch, _ := strings.Cut(pi.platform, "/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: pi.img, Descriptor: v1.Descriptor{
			Platform: &v1.Platform{OS: goos, Architecture: arch},
		}})
		if err := addImageBlobs(blobs, pi.img); err != nil {
			return v1.Hash{}, fmt.Errorf("%s: %w", pi.platform, err)
		}
	}
	raw, err := idx.RawManifest()
	if err != nil {
		return v1.Hash{}, err
	}
	digest, err := idx.Digest()
	if err != nil {
		return v1.Hash{}, err
	}
	blobs[digest] = raw
	top, err := json.Marshal(v1.IndexManifest{
		SchemaVersion: 2,
		MediaType:     types.OCIImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType: types.OCIImageIndex, Digest: digest, Size: int64(len(raw)),
			Annotations: map[string]string{annotationImageName: containerdName(ref.String()), annotationRefName: ref.TagStr()},
		}},
	})
	if err != nil {
		return v1.Hash{}, err
	}

	f, err := os.Create(out)
	if err != nil {
		return v1.Hash{}, err
	}
	tw := tar.NewWriter(f)
	put := func(file string, data []byte) error {
		hdr := &tar.Header{Typeflag: tar.TypeReg, Name: file, Mode: 0o644, Size: int64(len(data)), ModTime: epoch, Format: tar.FormatPAX}
		if data == nil {
			hdr.Typeflag, hdr.Mode = tar.TypeDir, 0o755
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	err = put("blobs/", nil)
	if err == nil {
		err = put("blobs/sha256/", nil)
	}
	hashes := make([]v1.Hash, 0, len(blobs))
	for h := range blobs {
		hashes = append(hashes, h)
	}
	slices.SortFunc(hashes, func(a, b v1.Hash) int { return strings.Compare(a.String(), b.String()) })
	for _, h := range hashes {
		if err == nil {
			err = put("blobs/sha256/"+h.Hex, blobs[h])
		}
	}
	if err == nil {
		err = put("index.json", top)
	}
	if err == nil {
		err = put("oci-layout", []byte(`{"imageLayoutVersion":"1.0.0"}`))
	}
	if err == nil {
		err = tw.Close()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return digest, err
}

// addImageBlobs adds an image's manifest, config and layers to blobs.
func addImageBlobs(blobs map[v1.Hash][]byte, img v1.Image) error {
	raw, err := img.RawManifest()
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	blobs[digest] = raw
	cfg, err := img.RawConfigFile()
	if err != nil {
		return err
	}
	cfgName, err := img.ConfigName()
	if err != nil {
		return err
	}
	blobs[cfgName] = cfg
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		rc, err := l.Compressed()
		if err != nil {
			return err
		}
		data, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			return err
		}
		blobs[d] = data
	}
	return nil
}

// containerdName is ref as containerd and the kubelet name an image: the
// Docker normalization (docker.io/library/NAME for a bare name, docker.io/
// before a path without a registry, localhost a registry), which
// go-containerregistry does not share (it takes localhost/x for a Docker Hub
// repository and says index.docker.io).
func containerdName(ref string) string {
	first, _, ok := strings.Cut(ref, "/")
	switch {
	case !ok:
		return "docker.io/library/" + ref
	case strings.ContainsAny(first, ".:") || first == "localhost":
		return ref
	}
	return "docker.io/" + ref
}
