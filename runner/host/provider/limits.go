package provider

import (
	"fmt"
	"strconv"
	"strings"
)

// Limits bound what a sandbox may take from the host it shares with other
// runs. Every sandbox gets them (contract §7.1: a pids limit and a
// memory limit always).
type Limits struct {
	// PidsLimit caps the tasks (processes and threads) of the sandbox;
	// zero means DefaultLimits.PidsLimit.
	PidsLimit int64 `json:"pids_limit"`
	// MemoryBytes caps its memory (swap included: the engine is given the
	// same value for memory+swap); zero means DefaultLimits.MemoryBytes.
	MemoryBytes int64 `json:"memory_bytes"`
	// CPUShares is its relative CPU weight (1024 is a full share); zero
	// means DefaultLimits.CPUShares.
	CPUShares int64 `json:"cpu_shares"`
	// OOMScoreAdj is given to every process of the sandbox (pid 1, and
	// what the engine execs, harness included: they inherit it), so under
	// memory pressure the host kills sandboxes before its own processes;
	// zero means DefaultLimits.OOMScoreAdj. It leaves room below 1000 for
	// a harness raised above its supervisor.
	OOMScoreAdj int `json:"oom_score_adj"`
}

// DefaultLimits are the limits of a sandbox that asks for none.
var DefaultLimits = Limits{PidsLimit: 512, MemoryBytes: 2 << 30, CPUShares: 512, OOMScoreAdj: 500}

// Or fills the zero fields of l from d.
func (l Limits) Or(d Limits) Limits {
	if l.PidsLimit == 0 {
		l.PidsLimit = d.PidsLimit
	}
	if l.MemoryBytes == 0 {
		l.MemoryBytes = d.MemoryBytes
	}
	if l.CPUShares == 0 {
		l.CPUShares = d.CPUShares
	}
	if l.OOMScoreAdj == 0 {
		l.OOMScoreAdj = d.OOMScoreAdj
	}
	return l
}

// The bounds Check applies to a set limit; the CLI's flags quote them.
const (
	// MinPidsLimit: warden, the probe and a harness need more.
	MinPidsLimit = 16
	// MinMemoryBytes is the engine's minimum, 6 MiB.
	MinMemoryBytes = 6 << 20
	// MinCPUShares and MaxCPUShares bound the relative CPU weight.
	MinCPUShares, MaxCPUShares = 2, 262144
)

// Check refuses limits the engine would refuse or that would leave a
// sandbox unbounded. Zero fields are allowed (they mean the default).
func (l Limits) Check() error {
	switch {
	case l.PidsLimit < 0:
		return fmt.Errorf("pids limit %d: want > 0", l.PidsLimit)
	case l.PidsLimit > 0 && l.PidsLimit < MinPidsLimit:
		return fmt.Errorf("pids limit %d: want >= %d (warden, the probe and a harness need more)", l.PidsLimit, MinPidsLimit)
	case l.MemoryBytes < 0 || (l.MemoryBytes > 0 && l.MemoryBytes < MinMemoryBytes):
		return fmt.Errorf("memory %d bytes: want >= %d MiB (the engine's minimum)", l.MemoryBytes, MinMemoryBytes>>20)
	case l.CPUShares < 0 || (l.CPUShares > 0 && l.CPUShares < MinCPUShares) || l.CPUShares > MaxCPUShares:
		return fmt.Errorf("cpu shares %d: want %d..%d", l.CPUShares, MinCPUShares, MaxCPUShares)
	case l.OOMScoreAdj < -1000 || l.OOMScoreAdj > 1000:
		return fmt.Errorf("oom_score_adj %d: want -1000..1000", l.OOMScoreAdj)
	}
	return nil
}

// ParseBytes reads a size as docker does: a number of bytes, or one with a
// b, k, m or g suffix (powers of 1024, case-insensitive): "512m", "2g".
func ParseBytes(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	if n := len(t); n > 0 {
		switch t[n-1] {
		case 'b':
			t = t[:n-1]
		case 'k':
			mult, t = 1<<10, t[:n-1]
		case 'm':
			mult, t = 1<<20, t[:n-1]
		case 'g':
			mult, t = 1<<30, t[:n-1]
		}
	}
	v, err := strconv.ParseInt(t, 10, 64)
	if err != nil || v <= 0 || v > (1<<62)/mult {
		return 0, fmt.Errorf("invalid size %q: want a positive number of bytes, optionally with k, m or g", s)
	}
	return v * mult, nil
}
