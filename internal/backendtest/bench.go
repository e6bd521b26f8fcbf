package backendtest

import (
	"slices"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// BenchAcquireRelease measures, per iteration of b.Loop, one Acquire of
// key with o on be and one Release, failing the benchmark on any error.
func BenchAcquireRelease(b *testing.B, be backend.Backend, key string, o backend.AcquireOptions) {
	for b.Loop() {
		l, err := be.Acquire(b.Context(), key, o)
		if err != nil {
			b.Fatal(err)
		}
		if err := l.Release(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchRenew takes key with o on be, then measures one Renew per
// iteration of b.Loop, failing the benchmark on any error; o.TTL must
// outlast the slowest renewal.
func BenchRenew(b *testing.B, be backend.Backend, key string, o backend.AcquireOptions) {
	l, err := be.Acquire(b.Context(), key, o)
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if err := l.Renew(b.Context()); err != nil {
			b.Fatal(err)
		}
	}
}

// ReportLatencies sorts lat and reports its minimum, median, 99th
// percentile and maximum in microseconds, as the metrics min-µs, p50-µs,
// p99-µs and max-µs. It reports nothing when lat is empty.
func ReportLatencies(b *testing.B, lat []time.Duration) {
	if len(lat) == 0 {
		return
	}
	slices.Sort(lat)
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }
	b.ReportMetric(us(lat[0]), "min-µs")
	b.ReportMetric(us(lat[len(lat)/2]), "p50-µs")
	b.ReportMetric(us(lat[len(lat)*99/100]), "p99-µs")
	b.ReportMetric(us(lat[len(lat)-1]), "max-µs")
}
