# lockrun: build, test, benchmark. `make test` is what CI runs.
GO ?= go

.PHONY: build test services lint bench faults clean

build:
	$(GO) build -o bin/lockrun ./cmd/lockrun

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
# FAULTS_DURATION each; prints the reliability table of the README.
FAULTS_DURATION ?= 2m
faults: services
	$(GO) test -count=1 -timeout 6h -v -run TestFaults ./cmd/lockrun/faults -args -faults.duration=$(FAULTS_DURATION)

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin dist
