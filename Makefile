# lockrun: build, test, benchmark. `make test` is what CI runs.
GO ?= go

.PHONY: build test services lint bench clean

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

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./...

clean:
	rm -rf bin dist
