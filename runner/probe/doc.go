// Package probe looks at a task image from the inside, for the case owner:
// the os, python3, bash, marker files and the whole process table, before and
// after a harness ran, and the difference between the two.
//
// It shares no code with warden's supervision logic on purpose: the probe is
// the independent witness that a warden bug cannot hide itself from, so it
// reads /proc through package witness (the suite's and the soak's reader,
// never warden's runner/warden/proc) and never consults warden's receipts or
// markers.
package probe
