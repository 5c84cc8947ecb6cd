// Package proc reads the process table from a proc root (normally /proc, or a
// fake tree built by fakeproc) without trusting anything a process can write
// into it. A process is named by its Identity: pid plus start time, so a
// reused pid is never mistaken for the process that held it before.
package proc
