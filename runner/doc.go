// Package runner holds sandproof's packages grouped by where they run; it
// has no code of its own, only the layer test (layers_test.go) that keeps
// the groups apart.
//
//	warden/   in the sandbox: everything cmd/warden links (proc, stop,
//	          supervisor, launch, harness, receipt, fds, wardencli, mutant,
//	          version) and warden's benchmarks (bench)
//	probe/    in the sandbox: the probe cmd/probe runs in every case
//	agent/    the session agent's channel: the in-sandbox end cmd/sandagent
//	          serves and the host end certify drives (one package for now,
//	          so sandagent links the host's provider and hostfile)
//	host/     on the host: certify, session, provider, adapter, runtimes,
//	          capture, relay, engine, hostfile, soak, canary
//	model/    the scripted model (`sandproof model serve`, certify's default)
//	witness/  the independent checks of what a process, a kill and a receipt
//	          left, shared by the probe, the soak and the suite
//
// Test support (testenv, remoteengine, testimage, the local provider) is
// in internal/testsupport at the module root, beside conformance/ and
// fixtures/: tests use it, product code may not.
package runner
