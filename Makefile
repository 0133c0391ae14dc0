# toolgen. `make test` is what CI runs (.ci/run); see README.md.
GO       ?= go
FUZZTIME ?= 5m

.PHONY: all generate check check-diff test vet staticcheck fmt-check stale unit fuzz-corpus bench fuzz fuzz-short soak soak-scripts chaos scaleout node-deps go-deps conformance demo

all: test

## generate: regenerate gen/ from the specs (the //go:generate line in tools/).
generate:
	$(GO) generate ./...

## check-diff: what the specs' changes since AGAINST (default origin/main) do to safety
## and to callers; fails when a change weakens safety or breaks callers.
AGAINST ?= origin/main
check-diff:
	$(GO) run ./cmd/toolgen diff --against $(AGAINST) .

## demo: generate, then drive a scripted agent through the example protocol on the
## embedded store (a read, a write, a denied call, a mode change, a held approval, a
## killed call recovered) and print the audit log.
demo: generate
	bash scripts/demo.sh

## check: check every spec and print the findings.
check:
	$(GO) run ./cmd/toolgen check .

## test: vet, staticcheck, gofmt, stale gen/, unit tests and testscripts, then the check that every
## committed fuzz corpus was replayed. It runs no fuzzing campaign: a campaign's outcome
## depends on the wall clock and the machine's load (make fuzz).
test: vet staticcheck fmt-check stale node-deps go-deps unit fuzz-corpus

## go-deps: what a module importing toolgen builds with, in the module cache, for the
## scripts that build one offline (testscripts ext_module, toolgen_host; GOPROXY=off):
## the released go-sdk, which this module replaces with third_party/go-sdk (PATCHES.md)
## and so never downloads itself (a replace does not travel to an importing module), and
## the go.mod files of the importing module's graph that this module's pruned graph never
## reads (go-logr/logr v1.2.2, required by go-logr/stdr's go 1.16 go.mod). It builds such
## a module, online, in a temporary directory: the host command line, the test host and
## the generator, as the scripts' modules use them.
go-deps:
	d="$$(mktemp -d)" && cp go.sum "$$d/" && (cd "$$d" && \
	  printf 'module example.com/godeps\n\ngo 1.26\n\nrequire github.com/toolgen/toolgen v0.0.0\n\nreplace github.com/toolgen/toolgen => $(CURDIR)\n' > go.mod && \
	  printf 'package main\n\nimport (\n\t_ "github.com/toolgen/toolgen/host/hostcli"\n\t_ "github.com/toolgen/toolgen/host/hosttest"\n)\n\nfunc main() {}\n' > main.go && \
	  GOFLAGS=-mod=mod $(GO) build . github.com/toolgen/toolgen/cmd/toolgen); \
	s=$$?; rm -rf "$$d"; exit $$s

## node-deps: the real MCP peers the tests talk to (a real server and a real client,
## the official conformance suite and the Node 22 it needs, pinned in
## .tooldeps/package-lock.json; the suite's reference server with its own
## package-lock.json in .tooldeps/conformance-everything-server), installed from the npm
## registry once (a stamp per lock file: run again, it does nothing). Without npm the
## tests that need them skip and say so.
CONFSERVER := .tooldeps/conformance-everything-server
node-deps: .tooldeps/node_modules/.installed $(CONFSERVER)/node_modules/.installed

.tooldeps/node_modules/.installed: .tooldeps/package.json .tooldeps/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd .tooldeps && npm ci --no-audit --no-fund && touch node_modules/.installed; \
	else echo "node-deps: npm not found: tests with real MCP peers will skip"; fi

$(CONFSERVER)/node_modules/.installed: $(CONFSERVER)/package.json $(CONFSERVER)/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd $(CONFSERVER) && npm ci --no-audit --no-fund && touch node_modules/.installed; \
	else echo "node-deps: npm not found: the conformance tests will skip"; fi

## conformance: the official MCP conformance suite (@modelcontextprotocol/conformance, on
## Node 22): 0.1.16, every server scenario at 2025-11-25, against `toolrun serve --http` with
## the builtins only, against the suite's reference server alone, and against toolrun as a
## gateway in front of it (testscripts/conformance.md); and 0.2.0-alpha.12, every server
## scenario at 2026-07-28 and every tasks-* scenario, against toolrun
## (testscripts/conformance-2026.md). Each scenario's outcome must be the table's. Part of
## make test too (go test ./...).
conformance: node-deps
	$(GO) test -count=1 -run '^TestConformance' -v ./testscripts/

vet:
	$(GO) vet ./...

## staticcheck: staticcheck's default checks, at a pinned version (go run fetches it once
## into the module cache). Deprecated MCP features the 2025 revisions still use are
## acknowledged where they are used (//lint:ignore SA1019 with the reason).
STATICCHECK_VERSION := v0.8.2
staticcheck:
	$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./...

fmt-check:
	@out=$$(gofmt -l . | grep -v '\.txtar$$' || true); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## stale: fail, naming the files, when generated code is not what its sources produce.
stale:
	$(GO) run ./cmd/toolgen generate -check .
	cd runtime && $(GO) run ./internal/reasongen -check

# The short versions of the reliability suites run with the unit tests: the crash tests
# and a 50-kill soak (runtime/crashtest), store fault injection at every write point and
# a 5 % fault rate (runtime/faulttest), and one PostgreSQL restart under four workers
# (runtime/chaostest, on a throwaway cluster). Their long versions: make soak, make chaos.
# The fuzz targets run as plain tests here: every seed and every committed corpus file
# under testdata/fuzz/, no fuzzing (fuzz-corpus checks that each file was replayed).
#
# unit does not pass -short, on purpose. -short skips tests that are acceptance tests:
# the crash matrix, the kill soak and the crash loop (runtime/crashtest), the chaos
# test (runtime/chaostest), the generated code's compile and behaviour test (codegen)
# and the external-module testscripts (ext_*, and the module-building halves of
# spec8_builtin_refs, gen_go_generate_paths and toolgen_host); and it sizes
# runtime/faulttest's rate run down from 200 calls to 50. -short would buy time, not
# determinism: these suites are sized by counts (kills, cases, calls), so a loaded
# machine makes them slower; the one thing in make test that was sized by the wall
# clock, the 10 s fuzz campaigns, is gone. go test -short ./... is the quick loop while
# developing.
unit:
	CRASHTEST_CONCURRENCY=1 $(GO) test -count=1 -timeout 15m ./...

## fuzz-corpus: every fuzz target runs as a plain test, and every file of every
## <package>/testdata/fuzz/<Target>/ must have been replayed (a corpus left under a
## renamed target would otherwise never run). See scripts/fuzz.sh -replay.
fuzz-corpus:
	bash scripts/fuzz.sh -replay

## bench: generation, pipeline, store and MCP benchmarks (figures go to BENCHMARKS.md;
## PostgreSQL ones need TOOLGEN_PG_DSN and pgbench).
bench:
	$(GO) test -run XXX -bench . -benchmem -count 3 ./codegen/ ./spec/
	$(GO) test -run XXX -bench BenchmarkPipelineOverhead -benchmem -count 5 ./runtime/bench/
	$(GO) test -run XXX -bench 'BenchmarkPostgresCalls|BenchmarkSQLiteCalls' -benchtime 1x -timeout 30m ./runtime/bench/
	$(GO) test -run XXX -bench BenchmarkServeOverhead -benchtime 1x -v ./mcp/bench/

## fuzz: every fuzz target of the repository (scripts/fuzz.sh lists them, and refuses to
## run when the list and the tree differ) for FUZZTIME each, two at a time (about 35
## minutes). FUZZTIME=100000x runs a count of inputs instead, with no deadline. A target
## fails only on a finding: a failing input written to testdata/fuzz/ (commit it), or any
## failure other than Go's -fuzztime boundary race (golang/go#75804: a bare "context
## deadline exceeded", no input written, corpus replaying clean), which is reported as a
## note. make soak, make chaos and make fuzz take about an hour together.
FUZZJOBS ?= 2
fuzz:
	FUZZTIME=$(FUZZTIME) FUZZJOBS=$(FUZZJOBS) bash scripts/fuzz.sh

## fuzz-short: a quick campaign, 20,000 inputs per target (count-based: no wall-clock
## deadline); not part of make test.
fuzz-short:
	FUZZTIME=20000x bash scripts/fuzz.sh

## soak: the kill soak (runtime/crashtest TestCrashSoak): SOAK_KILLS SIGKILLs per store at
## random instants over every window x idempotency class, on SQLite and (with
## TOOLGEN_PG_DSN) PostgreSQL, about 2-4 minutes on 2 CPUs; then FAULT_CALLS calls per
## store with 5 % of store writes failing in every way (runtime/faulttest), about 7
## minutes. The tables go to SOAK_OUT and FAULT_OUT.
SOAK_KILLS  ?= 1000
SOAK_OUT    ?= soak-results.md
FAULT_CALLS ?= 5000
FAULT_OUT   ?= faulttest-results.md
## soak-scripts: the SIGKILL soak of sandbox.run_script (issue 19): SCRIPT_KILLS
## (default 200) kills at random pipeline steps of a script with non_idempotent calls,
## each followed by recovery, on SQLite and, with TOOLGEN_PG_DSN, PostgreSQL; fails if an
## effect ran twice. SCRIPT_SOAK_OUT=file appends the figures (a Markdown table row per store).
SCRIPT_KILLS ?= 200
soak-scripts:
	SANDBOX_SOAK_KILLS=$(SCRIPT_KILLS) SANDBOX_SOAK_OUT=$(if $(SCRIPT_SOAK_OUT),$(abspath $(SCRIPT_SOAK_OUT))) \
		$(GO) test -count=1 -timeout 60m -run '^TestScriptSoak$$' -v ./sandbox/

soak:
	CRASHTEST_SOAK_KILLS=$(SOAK_KILLS) CRASHTEST_SOAK_OUT=$(abspath $(SOAK_OUT)) \
		$(GO) test -count=1 -timeout 60m -run '^TestCrashSoak$$' -v ./runtime/crashtest/
	FAULTTEST_CALLS=$(FAULT_CALLS) FAULTTEST_OUT=$(abspath $(FAULT_OUT)) \
		$(GO) test -count=1 -timeout 60m -run TestFaultRate -v ./runtime/faulttest/

## scaleout: the scale-out soak's long form (testscripts TestScaleOutSoak): 3 toolrun serve
## replicas on one store (PostgreSQL with TOOLGEN_PG_DSN, and a SQLite file) behind a
## round-robin proxy, clients at 2025-11-25 and 2026-07-28 making SCALEOUT_CALLS mixed calls
## while a replica is SIGKILLed and restarted every SCALEOUT_KILL_EVERY calls. make test runs
## the short form (240 calls, a kill every 60).
SCALEOUT_CALLS ?= 2400
SCALEOUT_KILL_EVERY ?= 300
scaleout:
	SCALEOUT_CALLS=$(SCALEOUT_CALLS) SCALEOUT_KILL_EVERY=$(SCALEOUT_KILL_EVERY) \
		$(GO) test -count=1 -timeout 60m -run '^TestScaleOutSoak$$' -v ./testscripts/

## chaos: the PostgreSQL chaos (runtime/chaostest TestPostgresChaos): CHAOS_CALLS calls by
## four worker processes on a throwaway cluster (initdb in a temporary directory, its own
## port) stopped for 0-2 s every 5-20 s; the tables go to CHAOS_OUT. Needs initdb and
## postgres (as root: a postgres user). About 3 minutes on 2 CPUs.
CHAOS_CALLS ?= 5000
CHAOS_OUT   ?= chaos-results.md
chaos:
	CHAOSTEST_CALLS=$(CHAOS_CALLS) CHAOSTEST_OUT=$(abspath $(CHAOS_OUT)) \
		$(GO) test -count=1 -timeout 60m -run '^TestPostgresChaos$$' -v ./runtime/chaostest/
