package main

import (
	"bytes"
	"crypto/sha256"
	"debug/buildinfo"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"runtime/debug"
	"strings"
	"time"
)

// SPDX 2.3 JSON, the subset an SBOM of a Go binary needs. Field names follow
// https://spdx.github.io/spdx-spec/v2.3/ (the JSON schema's).
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Files             []spdxFile         `json:"files"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string            `json:"name"`
	SPDXID           string            `json:"SPDXID"`
	VersionInfo      string            `json:"versionInfo,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	LicenseConcluded string            `json:"licenseConcluded"`
	LicenseDeclared  string            `json:"licenseDeclared"`
	CopyrightText    string            `json:"copyrightText"`
	Comment          string            `json:"comment,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
}

type spdxExternalRef struct {
	ReferenceCategory string `json:"referenceCategory"`
	ReferenceType     string `json:"referenceType"`
	ReferenceLocator  string `json:"referenceLocator"`
}

type spdxFile struct {
	FileName  string         `json:"fileName"`
	SPDXID    string         `json:"SPDXID"`
	Checksums []spdxChecksum `json:"checksums"`
}

type spdxChecksum struct {
	Algorithm     string `json:"algorithm"`
	ChecksumValue string `json:"checksumValue"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

func sbomPath(out, platform string) string {
	return strings.TrimSuffix(out, ".tar") + "." + strings.ReplaceAll(platform, "/", "-") + ".spdx.json"
}

func writeSBOM(file string, img platformImage, binPath string, epoch time.Time) error {
	binPath = strings.TrimPrefix(binPath, "/")
	data, ok := img.files[binPath]
	if !ok {
		return fmt.Errorf("no regular file /%s in the image", binPath)
	}
	info, err := buildinfo.Read(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("reading its Go build information: %w", err)
	}
	sum := sha256.Sum256(data)
	doc := spdxFor(info, "/"+binPath, img.platform, hex.EncodeToString(sum[:]), epoch)
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(file, append(out, '\n'), 0o644)
}

const (
	noAssertion = "NOASSERTION"
	binaryID    = "SPDXRef-File-binary"
)

var spdxIDUnsafe = regexp.MustCompile(`[^A-Za-z0-9.-]+`)

// spdxFor describes a Go binary: a package for the main module, one for the
// Go standard library (the toolchain version), one per module the binary
// links (a replaced module is named by its replacement, which is what was
// compiled, with the original in the comment), and the binary as a file
// with its SHA-256. Everything derives from the binary and epoch, so the
// same binary gives the same document.
func spdxFor(info *buildinfo.BuildInfo, binPath, platform, sha string, epoch time.Time) spdxDocument {
	main := modulePackage(&info.Main, "SPDXRef-Package-main")
	if main.VersionInfo == "" || main.VersionInfo == "(devel)" {
		main.Comment = "the main module; its version is not stamped (built outside version control or with -buildvcs=false)"
	}
	if rev := setting(info, "vcs.revision"); rev != "" {
		main.Comment = strings.TrimSpace("vcs.revision " + rev + " vcs.modified " + setting(info, "vcs.modified") + " " + main.Comment)
	}
	stdlib := spdxPackage{
		Name: "stdlib", SPDXID: "SPDXRef-Package-stdlib", VersionInfo: info.GoVersion,
		DownloadLocation: "https://go.dev/dl/", LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
		ExternalRefs: []spdxExternalRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/stdlib@" + info.GoVersion}},
		Comment:      "the Go toolchain that built the binary; build settings: " + buildSettings(info),
	}
	doc := spdxDocument{
		SPDXVersion: "SPDX-2.3", DataLicense: "CC0-1.0", SPDXID: "SPDXRef-DOCUMENT",
		Name:              info.Main.Path + " " + platform,
		DocumentNamespace: "https://github.com/deckhand-dev/deckhand/spdx/" + strings.ReplaceAll(platform, "/", "-") + "/" + sha,
		CreationInfo: spdxCreationInfo{
			Created:  epoch.UTC().Format(time.RFC3339),
			Creators: []string{"Tool: deckhand hack/k8s/image", "Tool: " + info.GoVersion + " debug/buildinfo"},
		},
		Files: []spdxFile{{FileName: binPath, SPDXID: binaryID, Checksums: []spdxChecksum{{"SHA256", sha}}}},
		Relationships: []spdxRelationship{
			{"SPDXRef-DOCUMENT", "DESCRIBES", binaryID},
			{binaryID, "GENERATED_FROM", main.SPDXID},
			{main.SPDXID, "DEPENDS_ON", stdlib.SPDXID},
		},
	}
	doc.Packages = append(doc.Packages, main, stdlib)
	for _, dep := range info.Deps {
		p := modulePackage(dep, "SPDXRef-Package-"+spdxIDUnsafe.ReplaceAllString(dep.Path+"-"+dep.Version, "-"))
		doc.Packages = append(doc.Packages, p)
		doc.Relationships = append(doc.Relationships, spdxRelationship{main.SPDXID, "DEPENDS_ON", p.SPDXID})
	}
	return doc
}

func modulePackage(m *debug.Module, id string) spdxPackage {
	p := spdxPackage{
		Name: m.Path, SPDXID: id, VersionInfo: m.Version,
		DownloadLocation: noAssertion, LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
	}
	built := m
	if m.Replace != nil {
		built = m.Replace
		p.Comment = "replaces " + m.Path + " " + m.Version
		p.Name, p.VersionInfo = m.Replace.Path, m.Replace.Version
	}
	if built.Version != "" && built.Version != "(devel)" {
		p.DownloadLocation = "https://proxy.golang.org/" + proxyEscape(built.Path) + "/@v/" + proxyEscape(built.Version) + ".zip"
		p.ExternalRefs = []spdxExternalRef{{"PACKAGE-MANAGER", "purl", "pkg:golang/" + built.Path + "@" + built.Version}}
	}
	if built.Sum != "" {
		p.Comment = strings.TrimSpace(p.Comment + " go.sum " + built.Sum)
	}
	return p
}

func setting(info *buildinfo.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

func buildSettings(info *buildinfo.BuildInfo) string {
	parts := make([]string, 0, len(info.Settings))
	for _, s := range info.Settings {
		parts = append(parts, s.Key+"="+s.Value)
	}
	return strings.Join(parts, " ")
}

// proxyEscape is the module proxy's case encoding: each upper-case letter
// becomes '!' and its lower case (golang.org/x/mod/module.EscapePath).
func proxyEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if 'A' <= r && r <= 'Z' {
			b.WriteByte('!')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
