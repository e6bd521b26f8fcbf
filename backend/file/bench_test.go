package file

import "testing"

// Benchmarks of the hot paths, for benchstat:
// go test -run '^$' -bench . -count 10 ./backend/file

// BenchmarkAcquireRelease takes and gives back a free lock: open, flock,
// read the record, write and fsync the next token, unlock.
func BenchmarkAcquireRelease(b *testing.B) {
	be, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	o := opts("r")
	for b.Loop() {
		l, err := be.Acquire(b.Context(), "k", o)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRenew checks that a held lock is still ours, as every
// heartbeat does: the file is still the one locked, and not revoked.
func BenchmarkRenew(b *testing.B) {
	be, err := Open(b.TempDir())
	if err != nil {
		b.Fatal(err)
	}
	l, err := be.Acquire(b.Context(), "k", opts("r"))
	if err != nil {
		b.Fatal(err)
	}
	defer l.Release(b.Context())
	for b.Loop() {
		if err := l.Renew(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}
