# pgleader — make help lists the targets.
GO      ?= go
BIN     := bin/pgleader
# The lab build (-tags pgleader_lab): the chaos harness (toxiproxy) and the
# benchmarks, and `pgleader node`'s hidden --test-* fault hooks that chaos's
# pause-write scenario drives. `make chaos` and `make bench` run it; the production
# binary has none of it (its chaos and bench say where they went).
LAB_BIN := bin/pgleader-lab
PKGS    := ./...
# The release version (VERSION, the only place it is written) and the commit,
# -dirty when the checkout has changes: stamped into every binary (pgleader version).
VERSION := $(shell cat VERSION)
COMMIT  := $(shell git describe --always --dirty --abbrev=12 --exclude '*' 2>/dev/null)
# Binaries as a release ships them: static, paths trimmed, without DWARF and the
# symbol table (stack traces keep their names), version and commit stamped.
# A plain go build / go install says what the toolchain recorded instead.
RELEASE_BUILD := CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X main.version=$(VERSION) -X main.commit=$(COMMIT)"
# Long soaks and benchmarks are kept out of `make test` (CI budget: 15 minutes).
# Three tiers, one after the other. The packages whose tests measure takeovers
# and failovers against tight bounds on 2 cores (process-level faults, chaos,
# priorities, HAProxy, the conformance kit, an outage seen by Prometheus) run one
# at a time (-p 1), so that no other package's tests compete with them; the other
# packages that run nodes and servers two at a time; the rest, which run no node
# process, two at a time first.
TEST_TIMEOUT ?= 12m
SERIAL_PKGS := ./election ./lab/chaos ./lab/cluster ./lab/conformance ./examples/node-haproxy \
	./examples/python-native ./exporter
NODES_PKGS := ./cmd/pgleader ./collector ./collector/logical ./election/electionapi ./election/electionprom \
	./examples/... ./exporter/dashboard ./lab/bench ./lab/upgrade ./migrations ./operator ./supervisor ./workload
SERIAL = $(shell $(GO) list $(SERIAL_PKGS))
NODES = $(filter-out $(SERIAL),$(shell $(GO) list $(NODES_PKGS)))
REST = $(filter-out $(SERIAL) $(NODES) %/lab/release,$(shell $(GO) list $(PKGS)))
# `make bench`'s scale run: 5 nodes × 1000 scopes, the README's figure (about a
# minute); e.g. make bench SCALE_ARGS="--nodes 5 --scopes 200" for a quicker one.
SCALE_ARGS ?= --nodes 5 --scopes 1000
# `make bench`'s A/B: the build it measures this one against, in the same run (a
# git ref, built once and cached): by default the previous release, the build a
# rolling upgrade starts from (lab/upgrade.PreviousRelease).
BENCH_BASELINE ?= 2ef21015a191a26647edd562a5882876df59d0e6

.PHONY: help build build-lab dist test test-short lint bench bench-quick chaos demo clean deps api-baseline

help: ## list targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-12s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

deps: ## install what a fresh machine lacks (PostgreSQL server binaries); idempotent
	@./.ci/install-deps

build: ## build bin/pgleader: the production binary, as make dist ships it
	$(RELEASE_BUILD) -o $(BIN) ./cmd/pgleader

build-lab: ## build bin/pgleader-lab: chaos, bench and the node's fault-test hooks
	$(RELEASE_BUILD) -tags pgleader_lab -o $(LAB_BIN) ./cmd/pgleader

dist: ## the release in dist/: archives (linux amd64/arm64, darwin arm64; the lab's), .debs, SHA256SUMS
	$(GO) run ./lab/release -o dist -version $(VERSION) -commit $(COMMIT)

test: deps ## the whole suite: unit, integration (throwaway PostgreSQL), process faults; -race
	$(GO) vet $(PKGS)
	$(GO) vet -tags pgleader_lab ./cmd/pgleader
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) test -race -count=1 -p 2 -timeout $(TEST_TIMEOUT) $(REST)
	$(GO) test -race -count=1 -p 2 -timeout $(TEST_TIMEOUT) $(NODES)
	$(GO) test -race -count=1 -p 1 -timeout $(TEST_TIMEOUT) $(SERIAL)
	# Allocation counts mean nothing under -race (it adds its own): the assertions
	# that count them run once more without it.
	$(GO) test -count=1 -run 'TestLeadDo/NoAllocation' ./election
	# The release packaging (a .deb built and checked with dpkg-deb) runs in one
	# goroutine; -race would only multiply its compression time.
	$(GO) test -count=1 ./lab/release

test-short: deps ## the edit-test loop (under 2 minutes): vet, unit tests and the fast integration tests
	$(GO) vet $(PKGS)
	$(GO) test -short -count=1 $$($(GO) list $(PKGS) | grep -v /lab/release)

api-baseline: ## record the promised packages' Go API (api/*.export), which make test holds the code to
	$(GO) test -count=1 -run TestAPICompatible ./api -args -record

lint: ## gofmt + go vet + staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet $(PKGS)
	$(GO) vet -tags pgleader_lab ./cmd/pgleader
	$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 $(PKGS)

bench: deps build-lab ## every benchmark on a throwaway PostgreSQL; writes docs/bench-*.json
	$(LAB_BIN) bench failover -n 50 --json docs/bench-failover.json
	$(LAB_BIN) bench failover -n 50 --scenarios crash,handover --baseline $(BENCH_BASELINE) --pairs 3 --json docs/bench-failover-ab.json
	$(LAB_BIN) bench failover -n 20 --mode lease --scenarios crash,frozen,load --json docs/bench-failover-lease.json
	$(LAB_BIN) bench scale $(SCALE_ARGS) --json docs/bench-scale.json
	$(LAB_BIN) bench collector -n 200 --json docs/bench-collector.json
	$(LAB_BIN) bench dashboard -n 50 --json docs/bench-dashboard.json
	$(LAB_BIN) bench dashboard --databases 10 -n 30 --json docs/bench-dashboard-fleet.json
	$(LAB_BIN) bench demo -n 5 --json docs/bench-demo.json
	$(LAB_BIN) bench run -n 20 --json docs/bench-run.json
	$(GO) test -run '^$$' -bench 'BenchmarkScrape|BenchmarkView|BenchmarkPoll' -benchtime 2s ./exporter/ ./tui/ ./collector/ | tee docs/bench-go.txt

bench-quick: deps build-lab ## a short failover benchmark run (n=10)
	$(LAB_BIN) bench failover -n 10

chaos: deps build-lab ## the soak: every chaos scenario for 60s (about 22 minutes); writes docs/chaos-soak.json
	$(LAB_BIN) chaos --duration 60s --json docs/chaos-soak.json

demo: deps build ## a local cluster you can break, on the dashboard, on a throwaway PostgreSQL (see README)
	$(BIN) demo

clean: ## remove build output
	rm -rf bin dist
