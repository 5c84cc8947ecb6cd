// Package runner holds sandproof's packages grouped by where they run; it
// has no code of its own, only the layer test (layers_test.go) that keeps
// the groups apart.
//
//	warden/   in the sandbox: everything cmd/warden links (proc, stop,
//	          supervisor, launch, harness, receipt, fds, wardencli, mutant,
//	          version) and warden's benchmarks (bench)
//	probe/    in the sandbox: the probe cmd/probe runs in every case
//	agent/    in the sandbox: the session agent's channel and the end
//	          cmd/sandagent serves (pax, the tar names it shares with the
//	          host); the host's end is host/agenthost
//	confine/  in the sandbox: the confined primitive (no link followed, no
//	          path resolved twice) the agent, the probe and rmtree share
//	rmtree/   in the sandbox: the removal helper a session uploads where
//	          there is no session agent (confine's removal, nothing else)
//	host/     on the host: certify, session, provider, agenthost, adapter,
//	          runtimes, glibc, artifact, capture, relay, engine, hostfile,
//	          canary, soak, statusline
//	model/    the scripted model (`sandproof model serve`, certify's default)
//	witness/  the independent checks of what a process, a kill and a receipt
//	          left, shared by the probe, the soak and the suite
//
// Test support (testenv, remoteengine, testimage, hostile, the local
// provider) is in internal/testsupport at the module root, beside
// conformance/, fixtures/ and fakeproc/: tests use them, product code may
// not (the layer test's test-only set).
package runner
