// Package glibc makes a glibc layer for a runtime prepared on the host: the
// host's glibc loader, libc and every library the runtime's ELF files need
// (their DT_NEEDED, resolved from the host's library dirs), copied into one
// flat directory of the runtime tree, so a glibc build runs in an image
// without glibc (musl + BusyBox) with nothing installed into the image.
//
// The runtime's own copies of its glibc executables get the layer's loader
// as their ELF interpreter: PT_INTERP is rewritten in place, padded with
// NULs, no byte moved. Launching them as an argument of the loader instead
// (`ld.so ./opencode`) would make /proc/self/exe the loader, and a
// Bun-compiled binary finds its payload through /proc/self/exe. The
// libraries are found through LD_LIBRARY_PATH=LibDir in the harness's
// environment: musl programs the harness runs look for musl's libc, which
// the layer does not hold (one linking libstdc++.so.6 would find the
// layer's glibc build first: docs/adapters.md says so).
//
// The runtime's ELF files are the harness's, and the layer goes where the
// harness reads it, so nothing they say is a host path to read: the
// loader is the host's glibc loader for their machine, which sandproof
// looks up by its soname in the library dirs (a PT_INTERP is only
// compared with the loaders sandproof knows), and every file copied is a
// regular file inside a library dir, readable by every user, an ELF
// object of the runtime's machine, within the caps below
// (docs/threat-model.md, "Host-side readers of harness artifacts").
package glibc
