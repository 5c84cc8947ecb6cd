// Package bench measures warden's stop cost side by side with a floor in the
// same run (`make bench`): a forced stop on a busy host, a stop of a
// 1,100-process tree against a bare SIGKILL of the same tree, and one scan of
// the process table against ps. It holds only benchmarks.
package bench
