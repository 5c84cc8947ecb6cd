# sandproof — build, test and measure. `make test` is the test command CI runs.
GO       ?= go
GINKGO   := $(GO) run github.com/onsi/ginkgo/v2/ginkgo
COMMIT   := $(shell git rev-parse --short=7 HEAD 2>/dev/null || echo unknown)
LDFLAGS  := -s -w -X github.com/sandproof/sandproof/runner/version.Commit=$(COMMIT)
BIN      := bin
ARCHES   := amd64 arm64
# Specs to run: everything that needs no container engine (`docker` specs
# come with the image matrix).
LABELS   ?= !docker

.PHONY: all build warden test vet unit conformance bench clean

all: build

build: warden
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "$(LDFLAGS)" -o $(BIN)/sandproof ./cmd/sandproof

# warden is static (no libc, no shell, no Python needed in the image) for
# both architectures the sandboxes run on.
warden:
	@for arch in $(ARCHES); do \
		echo "build $(BIN)/linux-$$arch/warden"; \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags "$(LDFLAGS)" \
			-o $(BIN)/linux-$$arch/warden ./cmd/warden || exit 1; \
	done

test: vet unit conformance

vet:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null; find . -name '*.go' -newer go.mod -not -path './.git/*' 2>/dev/null) | sort -u); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

unit:
	$(GO) test -count=1 $$($(GO) list ./... | grep -v -e /conformance -e /runner/bench)

conformance:
	$(GINKGO) -p --procs=2 --timeout=30m --label-filter='$(LABELS)' ./conformance

bench:
	$(GO) test -run '^$$' -bench . -benchtime 10x ./runner/bench

clean:
	rm -rf $(BIN)
