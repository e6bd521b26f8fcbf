package file

import (
	"testing"

	"github.com/lockrun/lockrun/internal/backendtest"
)

// Benchmarks of the hot paths, for benchstat:
// go test -run '^$' -bench . -count 10 ./backend/file

// BenchmarkAcquireRelease takes and gives back a free lock: open, flock,
// read the record, write and fsync the next token, unlock.
func BenchmarkAcquireRelease(b *testing.B) {
	be, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	backendtest.BenchAcquireRelease(b, be, "k", opts("r"))
}

// BenchmarkRenew checks that a held lock is still ours, as every
// heartbeat does: the file is still the one locked, and not revoked.
func BenchmarkRenew(b *testing.B) {
	be, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	backendtest.BenchRenew(b, be, "k", opts("r"))
}

// BenchmarkSemaphoreAcquireRelease takes and gives back a slot of a free
// semaphore: the shared flock, the mutex, a scan of the slots, the slot's
// flock, the token and the holder's record (two fsyncs), unlock.
func BenchmarkSemaphoreAcquireRelease(b *testing.B) {
	be, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	o := opts("r")
	o.Limit = 4
	backendtest.BenchAcquireRelease(b, be, "k", o)
}
