package containers

import (
	"context"
	"strings"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
)

// Tripwire paths: recording stand-ins in TripwireBin, put first on PATH of
// every exec the specs run, append to TripwireLog.
const (
	TripwireDir = "/sandproof-tripwire"
	TripwireBin = TripwireDir + "/bin"
	TripwireLog = TripwireDir + "/calls.log"
)

// TripwireTools are what a supervisor that "needs nothing from the image"
// must never run: interpreters, package managers, downloaders.
var TripwireTools = []string{"python3", "python", "pip", "pip3", "apt-get", "apt", "apk", "uv", "curl", "wget"}

// standIn logs its name and arguments and fails. /bin/sh is in all three
// images (dash or BusyBox sh); `echo "$0 $*"` prints the same in both.
const standIn = "#!/bin/sh\necho \"tripwire: $0 $*\" >> " + TripwireLog + "\nexit 1\n"

// PlantTripwire uploads the stand-ins and an empty, world-writable log (the
// harness may run as uid 1000), and proves they work: a stand-in called by
// name through the tripwire PATH must be logged. The log is then emptied.
func (s *Sandbox) PlantTripwire(ctx context.Context) {
	ginkgo.GinkgoHelper()
	files := []File{
		{Path: TripwireDir, Mode: 0o755, Dir: true},
		{Path: TripwireBin, Mode: 0o755, Dir: true},
		{Path: TripwireLog, Mode: 0o666},
	}
	for _, t := range TripwireTools {
		files = append(files, File{Path: TripwireBin + "/" + t, Mode: 0o755, Data: []byte(standIn)})
	}
	s.Upload(files...)
	// Positive control, through the same PATH the specs use.
	r := s.Run(ctx, Exec{Argv: []string{"python3", "-c", "control"}, Env: s.Env()})
	gomega.Expect(r.Code).To(gomega.Equal(1), "the python3 stand-in should fail: %s", r)
	gomega.Expect(s.TripwireCalls(ctx)).To(gomega.ConsistOf(gomega.ContainSubstring(TripwireBin+"/python3 -c control")),
		"positive control: the stand-in called by name is logged")
	s.Upload(File{Path: TripwireLog, Mode: 0o666})
	gomega.Expect(s.TripwireCalls(ctx)).To(gomega.BeEmpty())
}

// Env returns the environment for execs: the tripwire first on PATH.
func (s *Sandbox) Env() []string {
	return []string{"PATH=" + TripwireBin + ":" + s.PATH}
}

// TripwireCalls returns the logged calls, one per stand-in run.
func (s *Sandbox) TripwireCalls(ctx context.Context) []string {
	ginkgo.GinkgoHelper()
	data, ok := s.ReadFile(ctx, TripwireLog)
	gomega.Expect(ok).To(gomega.BeTrue(), "read %s", TripwireLog)
	var calls []string
	for _, l := range strings.Split(string(data), "\n") {
		if l != "" {
			calls = append(calls, l)
		}
	}
	return calls
}
