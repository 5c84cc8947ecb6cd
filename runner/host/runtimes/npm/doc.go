// Package npm is the npm runtime kind: a harness prepared on the host from
// pinned npm packages named in a manifest (docs/adapters.md, "The npm
// preparer"), so nothing is installed from the network inside a sandbox.
// It reads and checks the with block (the package, its lock, the platform
// builds, the Node a JS entry runs on), fetches and unpacks the pinned
// tarballs and stages the tree; the cache, the sums, the stamp and the
// link into a case are package runtimes', the same for every kind. No
// harness is special-cased here: Pi and OpenCode are manifests like any
// other.
package npm
