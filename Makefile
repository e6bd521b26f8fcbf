# lockrun: build, test, benchmark. `make test` is what CI runs.
GO ?= go

.PHONY: build test services lint bench microbench faults clean

# The release build (goreleaser.yaml builds the same way): static, symbols
# stripped, and without urfave/cli's man page and markdown generators, whose
# package init every run of lockrun (and of its watchdog) would pay for.
# `go install ./cmd/lockrun` and `go run` work without these flags.
BUILD_TAGS = urfave_cli_no_docs
build:
	CGO_ENABLED=0 $(GO) build -tags $(BUILD_TAGS) -trimpath -ldflags "-s -w" -o bin/lockrun ./cmd/lockrun

# Installs and starts the servers the tests need (root on Debian), then
# runs the linters and the whole suite under the race detector.
test: services lint
	$(GO) test -race -count=1 -timeout 20m ./...

services:
	./.ci/services.sh

lint:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...

# The fault harness's long run: every case on every backend for
# FAULTS_DURATION each; prints the table of docs/reliability.md.
FAULTS_DURATION ?= 2m
faults: services
	$(GO) test -count=1 -timeout 6h -v -run TestFaults ./tests/faults -args -faults.duration=$(FAULTS_DURATION)

# lockrun against flock, redis-cli, etcdctl lock and psql on every backend,
# in one run (a few minutes): the tables of docs/performance.md.
bench: services build
	$(GO) test -run '^$$' -bench Report -benchtime 1x -timeout 30m ./tests/bench -lockrun $(CURDIR)/bin/lockrun

# The hot paths' micro-benchmarks, for benchstat: acquire+release, renew and
# hand-off per backend.
microbench: services
	$(GO) test -run '^$$' -bench . -skip Report -benchmem ./...

clean:
	rm -rf bin dist
