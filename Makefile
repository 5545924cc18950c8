# Loupe's Makefile. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

GO      ?= go
BIN     := bin/devui
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
# The PostgreSQL cluster that every test package of this checkout shares when TEST_DATABASE_URL is
# empty. It is named after the checkout's path (storetest.ClusterDir computes the same name), so two
# checkouts testing at once never stop each other's cluster.
export LOUPE_TEST_DATA_DIR ?= $(or $(TMPDIR),/tmp)/loupe-test-$(shell id -u)-$(shell printf %s "$(CURDIR)" | sha256sum | cut -c1-12)

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z\/_-]+:.*## / {printf "  \033[36m%-12s\033[0m %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: generate
generate: ## regenerate templ components (web/templates/*_templ.go)
	$(GO) tool templ generate

.PHONY: build
build: generate ## build bin/devui
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/devui

.PHONY: install
install: generate ## go install devui into $(go env GOPATH)/bin, so that `devui …` works from any directory
	$(GO) install -ldflags "$(LDFLAGS)" ./cmd/devui

.PHONY: run
run: build ## build, then serve the UI at http://127.0.0.1:4000 in local mode on the embedded PostgreSQL
	./$(BIN) serve --dev

.PHONY: scale
scale: ## 3 `devui serve --dev` (127.0.0.1:4000-4002) and 3 `devui worker` on the external PostgreSQL in DATABASE_URL, started together (scripts/scale.sh; SERVES, WORKERS, PORT, MAX_CONNS)
	@[ -n "$$DATABASE_URL" ] || { echo "make scale needs DATABASE_URL: the external PostgreSQL every process shares (make db/up, then export DATABASE_URL=postgres://loupe:loupe@127.0.0.1:5432/loupe?sslmode=disable)" >&2; exit 2; }
	@$(MAKE) --no-print-directory build
	./scripts/scale.sh

.PHONY: test
test: ## run every test, database and browser tests included, with -race
	@status=0; \
	$(GO) test -race -count=1 -timeout 30m ./... || status=$$?; \
	$(GO) run ./cmd/devui db stop --data-dir "$$LOUPE_TEST_DATA_DIR" >/dev/null 2>&1 || true; \
	exit $$status

GOLANGCI_LINT ?= $(GO) run github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

.PHONY: lint
lint: ## gofmt, go vet, golangci-lint (.golangci.yml: errcheck, staticcheck, unused, nilnil, gocritic, the import direction), and the example modules are tidy and vetted
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' | grep -v '_templ.go$$')); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GOLANGCI_LINT) run ./...
	@for m in examples/*/; do \
		(cd "$$m" && $(GO) mod tidy -diff >/dev/null) || { echo "$$m: go.mod or go.sum is not tidy: run go mod tidy there"; exit 1; }; \
		(cd "$$m" && $(GO) vet ./...) || exit 1; \
	done

.PHONY: templ-fresh
templ-fresh: ## fail when the committed templ output is stale
	$(GO) tool templ generate
	@git diff --exit-code -- '*_templ.go' || { echo "templ output is stale: run 'make generate' and commit"; exit 1; }
	@untracked=$$(git ls-files --others --exclude-standard -- '*_templ.go'); \
	if [ -n "$$untracked" ]; then echo "uncommitted templ output: $$untracked"; exit 1; fi

.PHONY: stress
stress: ## issue 24's load protocol: internal/runs, internal/server and internal/live under -race -count=2 side by side, three rounds (scripts/stress.sh; long)
	./scripts/stress.sh

.PHONY: chaos
chaos: ## crash harness, long form (a few minutes): kill workers, the serve and PostgreSQL under load, then check every run (internal/chaos)
	$(GO) run ./internal/chaos -rounds 10 -runs-per-round 24 -round-time 15s

.PHONY: chaos-short
chaos-short: ## crash harness, CI's short form (under 3 minutes)
	$(GO) run ./internal/chaos -rounds 4 -runs-per-round 16 -round-time 10s -postmaster-every 2

.PHONY: compat
compat: compat-genkit-go compat-genkit-cli compat-genkit-js compat-otel-js compat-genkit-go-app compat-genkit-port ## real client programs against a throwaway Loupe: Genkit Go, Genkit JS, the genkit CLI, an OTel exporter, a Genkit Go app under devui start; and the Genkit Go port

.PHONY: compat-genkit-go
compat-genkit-go: ## a real Genkit Go v1.4.0 app sends its traces to a throwaway Loupe (bench/genkit-telemetry.sh)
	bench/genkit-telemetry.sh

.PHONY: compat-otel-js
compat-otel-js: ## the real OpenTelemetry JS exporter sends GenAI-convention spans to a throwaway Loupe (compat/otel-js.sh)
	compat/otel-js.sh

.PHONY: compat-genkit-cli
compat-genkit-cli: ## the real genkit CLI (npm genkit-cli, pinned) and its Dev UI server against a throwaway Loupe (compat/genkit-cli.sh)
	compat/genkit-cli.sh

.PHONY: compat-genkit-js
compat-genkit-js: ## a real Genkit JS 1.42 app under devui start, dev and realtime modes: actions, runs, traces, interrupts resumed in the app or refused loudly, a cancel, its log lines; the genkit CLI reading them (compat/genkit-js.sh)
	compat/genkit-js.sh

.PHONY: compat-genkit-go-app
compat-genkit-go-app: ## a real Genkit Go v1.4.0 app under devui start -- go run .: actions, runs, traces, interrupts resumed in the app or refused loudly, a cancel; one that exits at once is backed off (compat/genkit-go.sh)
	compat/genkit-go.sh

.PHONY: compat-genkit-port
compat-genkit-port: ## examples/genkit-port is a Genkit Go v1.4.0 program ported by renaming its imports: check the rename, build and run both, compare their output
	examples/genkit-port/check.sh

.PHONY: bench-jaeger
bench-jaeger: ## GET of a 10,000-span trace, Loupe against Jaeger v1.76 in the same run (bench/jaeger-compare.sh; builds Jaeger once)
	bench/jaeger-compare.sh

.PHONY: bench-ingest
bench-ingest: ## batched OTLP ingest, Loupe against Jaeger v1.76 memory and badger and raw COPY, same run (bench/ingest-compare.sh)
	bench/ingest-compare.sh

.PHONY: bench-smoke
bench-smoke: ## run every benchmark and bench/ script once, tiny, so none rots (bench/smoke.sh)
	bench/smoke.sh

.PHONY: ci
ci: lint templ-fresh test chaos-short compat bench-smoke ## what CI runs: lint, templ freshness, every test, the crash harness, the Genkit compatibility check, every benchmark once

.PHONY: bench
bench: ## Go benchmarks, and Loupe's engine against Genkit Go v1.4.0 (bench/compare.sh)
	$(GO) test -run '^$$' -bench . -benchmem ./...
	bench/compare.sh

# How long `make fuzz` runs each fuzz target.
FUZZTIME ?= 30s

.PHONY: fuzz
fuzz: ## run every Go fuzz target for FUZZTIME each (default 30s; make fuzz FUZZTIME=5m)
	@set -e; for file in $$(grep -rl --include='*_test.go' '^func Fuzz' cmd internal | sort); do \
		pkg=./$$(dirname $$file); \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$file); do \
			echo "== $$name ($$pkg, $(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) $$pkg; \
		done; \
	done

.PHONY: db/up
db/up: ## start PostgreSQL 16 in Docker (then: export DATABASE_URL=postgres://loupe:loupe@127.0.0.1:5432/loupe?sslmode=disable)
	docker compose up -d db

.PHONY: db/down
db/down: ## stop the Docker PostgreSQL
	docker compose down
