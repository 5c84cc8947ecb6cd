# sandproof — build, test and measure. `make test` is the test command CI runs.
GO       ?= go
GINKGO   := $(GO) run github.com/onsi/ginkgo/v2/ginkgo
COMMIT   := $(shell git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X github.com/sandproof/sandproof/runner/version.Commit=$(COMMIT)
BIN      := bin
ARCHES   := amd64 arm64
# Specs to run (a Ginkgo label filter); `make test-local` leaves out `docker`.
LABELS   ?=

.PHONY: all build warden probe test test-local engine images vet unit conformance bench clean

all: build

build: warden probe
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/sandproof ./cmd/sandproof

# warden is static (no libc, no shell, no Python needed in the image) for
# both architectures the sandboxes run on.
warden:
	@for arch in $(ARCHES); do \
		echo "build $(BIN)/linux-$$arch/warden"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" \
			-o $(BIN)/linux-$$arch/warden ./cmd/warden || exit 1; \
	done

# The test command: a Docker engine (installed and started when missing, see
# images/engine.sh), the three test images, then every unit test and spec.
test: engine images
	$(MAKE) vet
	SANDPROOF_DOCKER=1 $(MAKE) unit
	$(MAKE) conformance

# Everything that needs no container engine.
test-local:
	$(MAKE) vet unit conformance LABELS='!docker'

engine:
	bash images/engine.sh start

images:
	$(GO) run ./cmd/sandproof images build

probe:
	@for arch in $(ARCHES); do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" \
			-o $(BIN)/linux-$$arch/probe ./cmd/probe || exit 1; \
	done

vet:
	@unformatted=$$(gofmt -l $$(find . -name '*.go' -not -path './.git/*')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v -e /conformance -e /runner/bench)

conformance:
	$(GINKGO) -p --procs=2 --timeout=40m $(if $(LABELS),--label-filter='$(LABELS)') ./conformance

bench:
	$(GO) test -run '^$$' -bench . -benchtime 10x ./runner/bench

clean:
	rm -rf $(BIN)
