// Package artifact writes what the host takes from a harness's artifacts
// into a directory of its own, before any sandbox exists: the files of an
// npm tarball (and of the Python wheels to come), and the host libraries
// a glibc layer carries. The harness names, shapes or chooses all of it,
// so a Tree trusts none of it:
//
//   - every name is a local, clean, slash-separated path below the tree's
//     directory (no absolute name, no "..", no empty or "." element), of
//     printable characters (no NUL, newline or other control character:
//     a name is written into listings, records and terminals, and no real
//     package has one), and every operation goes through an os.Root opened on that
//     directory, so nothing is created, written or removed outside it,
//     through a link or otherwise;
//   - only directories and regular files are made, each file 0755 (any
//     executable bit asked for) or 0644: no link, device, fifo or setuid
//     bit ever comes from an artifact (UntarCopyingLinks writes a link
//     of an archive to a regular file of the same archive as a copy of
//     that file);
//   - each file is capped in bytes, the tree in bytes and in entries,
//     decided on the size an entry declares before a byte of it is
//     written, and a file whose reader yields more than it declared is
//     refused at the declared size.
//
// A refusal wraps ErrRefused: the artifact is bad input (sandproof exits
// 2), and trying again cannot help. So does every error the artifact's
// own bytes cause on the way (Refusal: a bad archive, a file and a
// directory of one name); what the host's system fails with (an I/O
// error, a full disk) does not (exit 3, infrastructure). Untar drives a Tree from a tar stream;
// a wheel's zip would drive it the same way.
package artifact
