// Package confine is the one confined primitive for root file operations
// on sandbox paths: everything that runs as root inside a sandbox and
// touches a path the harness could have written (the session agent's put,
// get and remove, the rmtree helper) resolves it here, never by name, and
// so does the host where it reads a sandbox's tree as root (the docker
// provider's walk of a container's overlay upper dir: Walk).
//
// Why. Root acting on a path by name can be led anywhere by a link the
// harness planted at any component of it ({home}/lnk -> /, then
// {home}/lnk/etc/shadow), or swapped in between a check and the act (a
// directory checked as one, then replaced by a link to /etc before `rm -rf`
// recursed into it). So every operation here starts from a descriptor of
// the root, opens each component relative to its parent's descriptor
// without following a link (openat2 with RESOLVE_NO_SYMLINKS|
// RESOLVE_BENEATH where the kernel has it, else one O_NOFOLLOW|O_DIRECTORY
// step per component), and acts relative to the descriptor it opened once:
// a glob is matched against the entries read from the directory's own
// descriptor, a tree is removed by unlinkat through descriptors opened
// O_NOFOLLOW|O_DIRECTORY, never by a path resolved again. A directory
// swapped for a link mid-walk is met as a link, and the link itself is
// removed (or the path refused), never its target. A link is refused at
// every component, one that stays under the root included (in a container
// the root is /, so "under the root" would be every link).
//
// Reads. Walk reads a tree by the same rule, read-only: each entry looked
// at relative to its parent's descriptor, each directory descended into
// through a descriptor opened O_NOFOLLOW|O_DIRECTORY relative to its
// parent's, a directory swapped for a link met as the link. It is bounded
// (entries, path length, depth) and stops when its context ends.
//
// Mounts. A removal never descends into another mount: a directory whose
// st_dev (or, where the kernel reports it, whose mount id) differs from the
// directory the removal started in is left where it is, with ErrMountPoint,
// as `rm --one-file-system` would.
//
// This package links only the standard library and golang.org/x/sys: it
// runs in the sandbox (runner/layers_test.go holds it to that).
package confine
