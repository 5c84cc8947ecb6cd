// Package stop computes a launch's reached set from the process table and
// stops it: TERM, then KILL after the grace, rescanning on every round until
// nothing reached is alive or a bounded wait ends (contract §2, stop
// rules). It reads processes through proc.FS and signals through a
// Signaller, so the same code runs on the real /proc and on fakeproc trees.
package stop
