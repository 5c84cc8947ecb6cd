package conformance_test

import (
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/sandproof/sandproof/conformance/framework"
	"github.com/sandproof/sandproof/fakeproc"
	"github.com/sandproof/sandproof/runner/warden/proc"
	"github.com/sandproof/sandproof/runner/warden/stop"
)

// Services by identity after the service's death: the mutant servicepid
// (a service named by its pid alone) survived every other spec.
var _ = Describe("the stop engine, on a fake tree, after a declared service exited,", framework.Fakeproc, func() {
	framework.ConformanceIt("2 services by identity", "should stop a harness process that reuses the dead service's pid, not keep it as the service", func() {
		f := newFakeStop(fakeproc.Proc{})
		svc := f.k.Fork(fpSup, fakeproc.Proc{Comm: "warden", Setsid: true, Subreaper: true, Env: fpNoMarker()})
		f.launch.Services = []proc.Identity{svc}
		f.k.Exit(svc.PID)
		tool := f.k.Reuse(svc.PID, fakeproc.Proc{Comm: "tool", PPID: fpHarness, Setsid: true, Env: fpNoMarker()})
		Expect(tool.PID).To(Equal(svc.PID), "the tool holds the dead service's pid")
		Expect(tool.StartTime).NotTo(Equal(svc.StartTime), "and is another process")
		Expect(f.k.Parent(tool)).To(Equal(fpHarness))

		res := f.run()
		fpExpectStopped(f, res, tool, 0, stop.WhyDescendant)
		Expect(fpIDs(res.Preserved)).NotTo(ContainElement(tool))
	})
})
