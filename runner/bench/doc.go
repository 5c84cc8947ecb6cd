// Package bench measures warden's stop cost side by side with a floor in the
// same run (`make bench`): a forced stop on a busy host, a stop of a
// 1,100-process tree against a bare SIGKILL of the same tree, one scan of
// the process table against ps, a TERM-ignoring respawner's stop against
// the same tree obeying TERM, and a harness that exits at once on a host of
// 1,000 and of 5,000 processes against a late exit. It holds only
// benchmarks.
package bench
