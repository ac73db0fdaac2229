# weft — run `make` (or `make help`) to list the targets.
SHELL := bash
.DEFAULT_GOAL := help

GO            ?= go
BIN           := $(CURDIR)/bin
TEMPORAL_CLI  := github.com/temporalio/cli/cmd/temporal@v1.5.1
STATICCHECK   := honnef.co/go/tools/cmd/staticcheck@v0.8.2
WORKFLOWCHECK := go.temporal.io/sdk/contrib/tools/workflowcheck@v0.6.0

# go test timeout for the whole suite.
TEST_TIMEOUT ?= 20m
# How much each fuzz target runs in `make test` / `make fuzz`: a count of
# executions (Nx), not a duration. Go 1.26's fuzz coordinator can report a
# spurious "context deadline exceeded" failure when a duration runs out
# while a worker is mid-input (golang/go#75804, fixed in Go 1.27); a count
# never arms that deadline. 20000x takes 3-10 s per target here.
FUZZ_TIME ?= 20000x
# Flags of the dev-server harness in `make bench` (go run ./cmd/weftbench -h).
WEFTBENCH_FLAGS ?=
# Fuzz targets that must exist (package:Target). `make fuzz` runs every
# Fuzz target it finds; naming these makes a renamed or deleted one fail
# instead of being skipped silently.
FUZZ_EXPECTED := ./graph:FuzzDecode ./graph:FuzzValidate ./jsonstrict:FuzzDecode ./variables:FuzzTokenize

.PHONY: help dev build test fuzz lint bench web web-test web-check screenshots

help: ## list the targets
	@echo "Usage: make <target>"
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_\/.-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

bin/temporal: ## build the Temporal CLI (dev server + Web UI) into bin/ from the Go module proxy
	GOBIN=$(BIN) $(GO) install $(TEMPORAL_CLI)

bin/staticcheck:
	GOBIN=$(BIN) $(GO) install $(STATICCHECK)

bin/workflowcheck:
	GOBIN=$(BIN) $(GO) install $(WORKFLOWCHECK)

build: ## build bin/weft
	$(GO) build -o bin/weft ./cmd/weft

dev: bin/temporal build ## run `weft dev`: Temporal dev server + Web UI, PostgreSQL migrated, API and worker
	bin/weft dev

test: bin/temporal ## run every test (real PostgreSQL and bin/temporal), then every fuzz target for FUZZ_TIME executions
	$(GO) test ./... -count=1 -timeout $(TEST_TIMEOUT)
	@$(MAKE) --no-print-directory fuzz

fuzz: ## run every Fuzz target of every package for FUZZ_TIME (default 20000x executions)
	@set -euo pipefail; \
	targets=$$($(GO) test -list '^Fuzz' ./... | awk '/^Fuzz/ {f[n++] = $$1} /^(ok|\?) / {for (i = 0; i < n; i++) print $$2 ":" f[i]; n = 0}'); \
	module=$$($(GO) list -m); \
	for want in $(FUZZ_EXPECTED); do \
		if ! grep -qx "$$module/$${want#./}" <<<"$$targets"; then echo "fuzz target $$want not found" >&2; exit 1; fi; \
	done; \
	for t in $$targets; do \
		pkg=$${t%%:*}; fn=$${t##*:}; \
		echo "fuzz $$pkg $$fn for $(FUZZ_TIME)"; \
		$(GO) test "$$pkg" -run '^$$' -fuzz "^$$fn\$$" -fuzztime $(FUZZ_TIME); \
	done

lint: bin/staticcheck bin/workflowcheck ## gofmt check, go vet, staticcheck, workflowcheck on ./workflows/... and ./replay/...
	@unformatted=$$(gofmt -l $$(git ls-files -co --exclude-standard '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	bin/staticcheck ./...
	bin/workflowcheck ./workflows/... ./replay/...

bench: bin/temporal ## Go benchmarks, then the harness against real dev servers (cmd/weftbench; docs/benchmarks.md)
	$(GO) test ./... -run '^$$' -bench . -benchmem
	$(GO) run ./cmd/weftbench $(WEFTBENCH_FLAGS)

# The canvas (web/): TypeScript + React + Vite. Its built bundle web/dist is
# committed and embedded in the binary, so `make dev` and `make test` need
# no Node; these targets do (Node 20.19+ and npm).
web/node_modules/.package-lock.json: web/package.json web/package-lock.json
	cd web && npm ci --no-audit --no-fund

web: web/node_modules/.package-lock.json ## rebuild the canvas bundle web/dist from web/src (npm ci + vite build)
	cd web && npm run build

web-test: web/node_modules/.package-lock.json ## the canvas unit tests (Vitest: state mapping, layout input, stream parsing, API routes)
	cd web && npm test

web-check: web ## rebuild the canvas and fail if the committed web/dist is not what web/src builds
	@git diff --exit-code --stat -- web/dist || { echo "web/dist differs from what web/src builds: run make web and commit web/dist" >&2; exit 1; }
	@extra=$$(git ls-files --others --exclude-standard -- web/dist); \
	if [ -n "$$extra" ]; then echo "web/dist has files not committed: $$extra (run make web and commit web/dist)" >&2; exit 1; fi

screenshots: bin/temporal ## the browser tests, writing the README's canvas screenshots to docs/img
	WEFT_CANVAS_SCREENSHOTS=1 $(GO) test ./e2e/canvas -count=1
