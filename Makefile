# toolgen. `make test` is what CI runs (.ci/run); see README.md.
GO       ?= go
FUZZTIME ?= 60s

.PHONY: all generate check check-diff test vet fmt-check stale unit bench fuzz soak node-deps demo

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

## test: vet, gofmt, stale gen/, unit tests and testscripts.
test: vet fmt-check stale node-deps unit

## node-deps: the real MCP peers the tests talk to (a real server and a real client,
## pinned in .tooldeps/package-lock.json), installed from the npm registry once. Without
## npm the tests that need them skip and say so.
node-deps: .tooldeps/node_modules/.installed

.tooldeps/node_modules/.installed: .tooldeps/package.json .tooldeps/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
		cd .tooldeps && npm ci --no-audit --no-fund && touch node_modules/.installed; \
	else echo "node-deps: npm not found: tests with real MCP peers will skip"; fi

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l . | grep -v '^testscripts/.*\.txtar$$' || true); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## stale: fail, naming the files, when generated code is not what its sources produce.
stale:
	$(GO) run ./cmd/toolgen generate -check .
	cd runtime && $(GO) run ./internal/reasongen -check

# The crash tests of runtime/crashtest (real worker processes SIGKILLed while they share
# one database) and the short kill soak (50 SIGKILLs per store at random instants) take
# about a minute, so they run with the unit tests.
unit:
	CRASHTEST_CONCURRENCY=1 $(GO) test -count=1 -timeout 15m ./...

## bench: generation, pipeline, store and MCP benchmarks (figures go to BENCHMARKS.md;
## PostgreSQL ones need TOOLGEN_PG_DSN and pgbench).
bench:
	$(GO) test -run XXX -bench . -benchmem -count 3 ./codegen/ ./spec/
	$(GO) test -run XXX -bench BenchmarkPipelineOverhead -benchmem -count 5 ./runtime/bench/
	$(GO) test -run XXX -bench 'BenchmarkPostgresCalls|BenchmarkSQLiteCalls' -benchtime 1x -timeout 30m ./runtime/bench/
	$(GO) test -run XXX -bench BenchmarkServeOverhead -benchtime 1x -v ./mcp/bench/

## fuzz: fuzz the spec loader, the schema fast path and MCP name normalization.
fuzz:
	$(GO) test -run XXX -fuzz FuzzLoad -fuzztime $(FUZZTIME) ./spec/
	$(GO) test -run XXX -fuzz 'FuzzValid$$' -fuzztime $(FUZZTIME) ./runtime/internal/fastschema/
	$(GO) test -run XXX -fuzz FuzzValidSchema -fuzztime $(FUZZTIME) ./runtime/internal/fastschema/
	$(GO) test -run XXX -fuzz FuzzNormalizeName -fuzztime $(FUZZTIME) ./mcp/upstream/

## soak: the kill soak (runtime/crashtest TestCrashSoak): SOAK_KILLS SIGKILLs per store at
## random instants over every window x idempotency class, on SQLite and (with
## TOOLGEN_PG_DSN) PostgreSQL; the tables go to SOAK_OUT. About 2-4 minutes on 2 CPUs.
SOAK_KILLS ?= 1000
SOAK_OUT   ?= soak-results.md
soak:
	CRASHTEST_SOAK_KILLS=$(SOAK_KILLS) CRASHTEST_SOAK_OUT=$(abspath $(SOAK_OUT)) \
		$(GO) test -count=1 -timeout 60m -run '^TestCrashSoak$$' -v ./runtime/crashtest/
