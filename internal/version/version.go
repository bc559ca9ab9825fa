// Package version is the release a build of Deckhand is: the build sets it
// from VERSION (make build, make image, make release: -ldflags
// "-X github.com/deckhand-dev/deckhand/internal/version.Version=v0.6.0").
package version

// Version is "v" and the release, or "dev" for a build that did not say.
var Version = "dev"
