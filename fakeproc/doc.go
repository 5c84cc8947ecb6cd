// Package fakeproc builds fake /proc trees in a directory and simulates what
// the kernel does to them between two scans: signals that kill or are
// ignored, zombies, reparenting to a subreaper or pid 1, pid and group id
// reuse, environments rewritten, processes that fork or leave mid-stop. Its
// Kernel is a stop.Signaller, a stop.Clock and a stop.Engine pause step, so
// every race in the stop rules (contract §2) becomes a deterministic
// spec; ApplySignals and Follow do the same for a supervisor binary run with
// --proc-root, which records its signals instead of sending them.
//
// Nothing here touches a real process: the files are plain files in a
// temporary directory, written in the kernel's exact formats so that the
// production parser (runner/warden/proc) reads them as it reads /proc.
package fakeproc
