# lockrun: build, test, benchmark. `make test` is what CI runs.
GO ?= go

.PHONY: build test services lint release-check bench microbench faults clean

# The release build (goreleaser.yaml builds the same way): static, symbols
# stripped, and without urfave/cli's man page and markdown generators, whose
# package init every run of lockrun (and of its watchdog) would pay for.
# `go install ./cmd/lockrun` and `go run` work without these flags.
# bin/lockrun-watchdog, the watchdog lockrun starts beside every command,
# is built beside it: lockrun looks for it in its own directory (and runs
# itself as the watchdog, slower to start, where it is missing). So are
# the programs with the server backends' clients (lockrun-redis,
# lockrun-etcd, lockrun-postgres, lockrun-zookeeper), which lockrun starts
# in its place for their URLs: lockrun itself has the file backend only.
# The version, commit and commit date are stamped into `lockrun --version`
# (goreleaser stamps the same three); the man page and the completions are
# generated beside the binary from the CLI's definition, by a separate
# program (internal/gendocs) that the binary does not contain.
BUILD_TAGS = urfave_cli_no_docs
BUILDINFO = github.com/lockrun/lockrun/internal/buildinfo
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
DATE ?= $(shell TZ=UTC git log -1 --format=%cd --date=format-local:%Y-%m-%dT%H:%M:%SZ 2>/dev/null)
LDFLAGS = -s -w -X $(BUILDINFO).version=$(VERSION) -X $(BUILDINFO).commit=$(COMMIT) -X $(BUILDINFO).date=$(DATE)
build:
	CGO_ENABLED=0 $(GO) build -tags $(BUILD_TAGS) -trimpath -ldflags "$(LDFLAGS)" -o bin/ ./cmd/...
	$(GO) run ./internal/gendocs -out bin -version "$(VERSION)" -date "$(DATE)"

# Installs and starts the servers the tests need (root on Debian), then
# runs the linters, the whole suite under the race detector (CI set: a
# missing server fails rather than skips), and the release check.
# The fault harness runs alone, after the rest: it is its own load (every
# backend at once, then a busy loop on every core), and the timing tests of
# other packages must not share the two cores with it.
test: services lint
	CI=$${CI:-true} $(GO) test -race -count=1 -timeout 20m $$($(GO) list ./... | grep -v '/tests/faults$$')
	CI=$${CI:-true} $(GO) test -race -count=1 -timeout 10m ./tests/faults
	./.ci/release.sh

# goreleaser (pinned, from the Go module proxy) checks goreleaser.yaml and
# builds a snapshot; the .deb is installed here and its lockrun and man
# page checked. Root on Debian.
release-check:
	./.ci/release.sh

services:
	./.ci/services.sh

# gofmt, go vet and staticcheck (every check: staticcheck.conf), the
# latter pinned and run from the Go module proxy.
STATICCHECK = honnef.co/go/tools/cmd/staticcheck@v0.8.2
lint:
	@unformatted=$$(gofmt -l .); \
	if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...

# The fault harness's long run: every case on every backend for
# FAULTS_DURATION each; prints the table of docs/reliability.md, under a
# line with the date and the commit. FAULTS_ARGS adds flags, e.g.
# -faults.hog (every case beside a busy loop on every core).
FAULTS_DURATION ?= 2m
FAULTS_ARGS ?=
faults: services
	$(GO) test -count=1 -timeout 6h -v -run TestFaults ./tests/faults -args -faults.duration=$(FAULTS_DURATION) -faults.semaphores=all $(FAULTS_ARGS)

# lockrun against flock, redis-cli, etcdctl lock and psql on every backend,
# in one run (about 15 minutes on a quiet host, twice that on a slow one):
# the tables of docs/performance.md.
bench: services build
	$(GO) test -run '^$$' -bench Report -benchtime 1x -timeout 90m ./tests/bench -lockrun $(CURDIR)/bin/lockrun

# The hot paths' micro-benchmarks, for benchstat: acquire+release, renew and
# hand-off per backend.
microbench: services
	$(GO) test -run '^$$' -bench . -skip Report -benchmem ./...

clean:
	rm -rf bin dist build
