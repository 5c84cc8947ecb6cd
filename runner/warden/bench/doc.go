// Package bench measures warden's stop cost side by side with a baseline in
// the same run (`make bench`): a forced stop on a busy host, a stop of a
// 1,100-process tree against a bare SIGKILL of the same tree, one scan of
// the process table against ps, and the peer rows: the hopper, writer and
// daemon shapes and the 1,100-process tree under warden and under the
// field's standard-library Python supervisor (fixtures/peer/peer.py). The
// big-tree rows report each stop phase's share, read from the "stop
// phases" line warden logs. It holds only benchmarks.
package bench
