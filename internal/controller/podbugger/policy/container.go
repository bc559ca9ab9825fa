package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ContainerName is the name of the ephemeral container a PodBugger adds: the
// PodBugger's own name when that is a valid container name (a DNS-1123
// label), else that name with dots turned into dashes, cut to fit, and a
// hash of the full name appended so that two PodBuggers never share it.
func ContainerName(podBugger string) string {
	if len(validation.IsDNS1123Label(podBugger)) == 0 {
		return podBugger
	}
	sum := sha256.Sum256([]byte(podBugger))
	suffix := "-" + hex.EncodeToString(sum[:])[:8]
	base := strings.ReplaceAll(podBugger, ".", "-")
	if room := validation.DNS1123LabelMaxLength - len(suffix); len(base) > room {
		base = base[:room]
	}
	return strings.TrimRight(base, "-") + suffix
}
