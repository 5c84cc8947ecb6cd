// Package images builds the task images the suite runs warden in, from
// Debian's packages, since no container registry is reachable: debian-12 (a
// bookworm minbase), alpine-class (musl and BusyBox, assembled by hand) and
// old-python (bullseye with python3 first on PATH under /opt/testbed/bin).
//
// Each recipe is a directory under recipes/ (recipe.yaml and build.sh) plus
// the shared recipes/common.sh, embedded in the binary. An image is tagged
// sandproof/NAME:HASH12, HASH being the sha256 of those files, so an image
// whose tag the engine already has is never rebuilt and a changed recipe
// always is. The engine is driven through the docker CLI.
package images
