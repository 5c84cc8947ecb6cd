# sandproof — build, test and measure. `make test` is the test command CI runs.
GO       ?= go
GINKGO   := $(GO) run github.com/onsi/ginkgo/v2/ginkgo
COMMIT   := $(shell git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X github.com/sandproof/sandproof/runner/warden/version.Commit=$(COMMIT)
BIN      := bin
ARCHES   := amd64 arm64
# Specs to run (a Ginkgo label filter); `make test-local` leaves out `docker`.
LABELS   ?=

.PHONY: all build warden probe sandagent test test-local prereqs engine images vet unit conformance bench certify mutants mutants-host fuzz soak clean

all: build

build: warden probe sandagent
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/sandproof ./cmd/sandproof

# warden is static (no libc, no shell, no Python needed in the image) for
# both architectures the sandboxes run on.
warden:
	@for arch in $(ARCHES); do \
		echo "build $(BIN)/linux-$$arch/warden"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" \
			-o $(BIN)/linux-$$arch/warden ./cmd/warden || exit 1; \
	done

# The test command: the Debian packages the tests need (images/prereqs.sh),
# a Docker engine (started when none answers, see images/engine.sh), the
# three test images, then every unit test and spec. SANDPROOF_STRICT=1: a
# test or spec that lacks a prerequisite fails with one line saying what and
# how to get it, instead of skipping; it implies SANDPROOF_DOCKER=1.
test: prereqs engine images
	$(MAKE) vet
	SANDPROOF_STRICT=1 SANDPROOF_DOCKER=1 $(MAKE) unit
	SANDPROOF_STRICT=1 $(MAKE) conformance

# Everything that needs no container engine; what the machine lacks is
# skipped (not strict).
test-local:
	$(MAKE) vet unit conformance LABELS='!docker'

# Install the packages the tests, the images and the engine need (root, apt).
prereqs:
	bash images/prereqs.sh

engine: prereqs
	bash images/engine.sh start

images:
	$(GO) run ./cmd/sandproof images build

probe:
	@for arch in $(ARCHES); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" \
			-o $(BIN)/linux-$$arch/probe ./cmd/probe || exit 1; \
	done

# The session agent (runner/agent): static, for both architectures, like
# warden and the probe, and sharing no code with them.
sandagent:
	@for arch in $(ARCHES); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" \
			-o $(BIN)/linux-$$arch/sandagent ./cmd/sandagent || exit 1; \
	done

vet:
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

# runner/host/certify's engine tests (every hostile harness on three images) take
# longer than go test's default 10 minutes on a loaded 2-core host.
unit:
	$(GO) test -count=1 -timeout 30m $$($(GO) list ./... | grep -v -e /conformance -e /runner/warden/bench)

conformance:
	$(GINKGO) -p --procs=2 --timeout=40m $(if $(LABELS),--label-filter='$(LABELS)') ./conformance

# The main job: certify the fixture adapters and every manifest in adapters/
# (the real harnesses; their runtimes prepared on the host from npm) on the
# three images, against the embedded scripted model. A manifest's cases are
# skipped with the reason when the npm registry does not answer and its
# runtime is not cached. Leaves reports/<run>/evidence.jsonl, report.html,
# report.md and junit.xml.
RUN      ?= $(shell date -u +%Y%m%dT%H%M%SZ)
FIXTURE_ADAPTERS := fixtures/adapters/miniagent-pi.yaml fixtures/adapters/miniagent-opencode.yaml fixtures/adapters/miniagent-daemon.yaml
ADAPTERS ?= $(FIXTURE_ADAPTERS) $(sort $(wildcard adapters/*.yaml))
PARALLEL ?= 2

certify: prereqs engine images build
	$(BIN)/sandproof certify $(foreach a,$(ADAPTERS),--adapter $(a)) --parallel $(PARALLEL) --baseline 3 --out reports/$(RUN)
	@echo "report: reports/$(RUN)/report.html"

# Prove the suite catches broken supervisors: every mutant killed by a spec
# of its clause, the real warden by none, three runs in a row.
mutants:
	$(GO) run ./conformance/mutants --runs 3

# The host path's mutants (conformance/hostmutants, docs/mutation.md): each
# one-line bug of the catalogue on the files that decide a check, a status
# or a regression, against its package's engine-free unit tests (no engine,
# SANDPROOF_DOCKER unset); fails on a survivor the catalogue gives no
# reason for. The report (per package: killed, survived, timed out, score)
# goes to MUTANTS_HOST_OUT.
MUTANTS_HOST_OUT ?= $(BIN)/mutants-host.md
# Mutants side by side: a mutant costs about 2.5 s of CPU to build and then
# mostly waits on its tests' timers, so three keep two cores busy.
MUTANTS_HOST_JOBS ?= 3
mutants-host:
	@mkdir -p $(dir $(MUTANTS_HOST_OUT))
	$(GO) run ./conformance/hostmutants --jobs $(MUTANTS_HOST_JOBS) --out $(MUTANTS_HOST_OUT)

# Each fuzz target for a bounded time (FUZZTIME per target).
FUZZTIME ?= 30s
fuzz:
	$(GO) test ./runner/warden/proc -run '^$$' -fuzz '^FuzzParseStat$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runner/warden/proc -run '^$$' -fuzz '^FuzzLaunchIDs$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runner/warden/receipt -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runner/warden/harness -run '^$$' -fuzz '^FuzzParseParams$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runner/warden/harness -run '^$$' -fuzz '^FuzzRecorder$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runner/host/adapter -run '^$$' -fuzz '^FuzzParse$$' -fuzztime $(FUZZTIME)
	$(GO) test ./runner/agent -run '^$$' -fuzz '^FuzzReadFrame$$' -fuzztime $(FUZZTIME)

# N launch/stop cycles with adversarial fixtures: leftovers, missing or
# unconfirmed receipts, and stop latency percentiles.
CYCLES ?= 1000
soak: build
	$(BIN)/sandproof soak --cycles $(CYCLES) --parallel 4

bench:
	$(GO) test -run '^$$' -bench . -benchtime 10x -timeout 60m ./runner/warden/bench
	setpriv --bounding-set -sys_ptrace,-sys_admin,-perfmon $(GO) test -run '^$$' -bench EnvironAsOwner -benchtime 2000x -count 3 ./runner/warden/proc

clean:
	rm -rf $(BIN)
