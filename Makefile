# toolgen. `make test` is what CI runs (.ci/run); see README.md.
GO       ?= go
FUZZTIME ?= 60s

.PHONY: all generate check test vet fmt-check stale unit bench fuzz

all: test

## generate: regenerate gen/ from the specs (the //go:generate line in tools/).
generate:
	$(GO) generate ./...

## check: check every spec and print the findings.
check:
	$(GO) run ./cmd/toolgen check .

## test: vet, gofmt, stale gen/, unit tests and testscripts.
test: vet fmt-check stale unit

vet:
	$(GO) vet ./...

fmt-check:
	@out=$$(gofmt -l . | grep -v '^testscripts/.*\.txtar$$' || true); \
	if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## stale: fail, naming the files, when generated code is not what its sources produce.
stale:
	$(GO) run ./cmd/toolgen generate -check .
	cd runtime && $(GO) run ./internal/reasongen -check

# The crash soak of runtime/crashtest (real worker processes SIGKILLed while they share
# one database) takes under 30 s, so it runs with the unit tests.
unit:
	CRASHTEST_CONCURRENCY=1 $(GO) test -count=1 -timeout 15m ./...

## bench: generation and pipeline benchmarks (figures go to BENCHMARKS.md; PostgreSQL
## ones need TOOLGEN_PG_DSN and pgbench).
bench:
	$(GO) test -run XXX -bench . -benchmem -count 3 ./codegen/ ./spec/
	$(GO) test -run XXX -bench BenchmarkPipelineOverhead -benchmem -count 5 ./runtime/bench/
	$(GO) test -run XXX -bench 'BenchmarkPostgresCalls|BenchmarkSQLiteCalls' -benchtime 1x -timeout 30m ./runtime/bench/

## fuzz: fuzz the spec loader for every file kind.
fuzz:
	$(GO) test -run XXX -fuzz FuzzLoad -fuzztime $(FUZZTIME) ./spec/
