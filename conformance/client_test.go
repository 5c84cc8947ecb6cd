package conformance_test

// The suite's own engine client must not depend on what ran before it in
// the same process: a spec that runs alone (or first on its Ginkgo
// process) gets the same client as one that runs after a hundred others.

import (
	"errors"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	dc "github.com/ory/dockertest/v3/docker"

	"github.com/sandproof/sandproof/conformance/containers"
	"github.com/sandproof/sandproof/conformance/framework"
)

var _ = Describe("the suite's engine client,", framework.Docker, func() {
	It("sends an exec with Env as its first request after connecting, whatever ran before in this process", func() {
		// A client of its own, not the shared Pool, so no earlier spec can
		// have taught it the server's version. go-dockerclient refuses an
		// exec with Env before the request when it does not know the
		// server is at API 1.25 or later; the engine's "no such container"
		// shows the request was sent.
		p, err := containers.NewPool()
		Expect(err).NotTo(HaveOccurred(), "no docker engine answers (bash images/engine.sh start)")
		const missing = "sandproof-suite-no-such-container"
		_, err = p.Client.CreateExec(dc.CreateExecOptions{Container: missing, Cmd: []string{"true"}, Env: []string{"A=1"}})
		var nsc *dc.NoSuchContainer
		Expect(errors.As(err, &nsc)).To(BeTrue(), "create exec with Env in %s: want the engine's no such container, got %v", missing, err)
	})
})
