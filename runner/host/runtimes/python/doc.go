// Package python is the python runtime kind: a harness that is a Python
// program, prepared on the host with its interpreter, so nothing is
// installed inside a sandbox. The interpreter (interp*.go) is Debian
// trixie's CPython 3.13 with trixie's glibc and the libraries it needs,
// from pinned, sha256-checked .debs, in a tree that runs from wherever it
// is mounted, in an image of any libc, through its own loader.
package python
