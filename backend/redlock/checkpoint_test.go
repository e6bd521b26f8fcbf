package redlock

import (
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/backendtest"
)

func TestCheckpointConformance(t *testing.T) {
	raw := urlOf(masters(t, 3))
	backendtest.RunCheckpoints(t, backendtest.Harness{
		Open: func(t *testing.T) backend.Backend { return open(t, raw) },
		TTL:  time.Second,
	})
}

// A master that missed the holder's latest checkpoint (it answered after a
// majority had stored it, or not at all) still has an older value under
// the same token: a read must return the latest, whichever master answers
// first.
func TestCheckpointReadsTheLatestOfOneHolder(t *testing.T) {
	srvs := masters(t, 3)
	b := open(t, urlOf(srvs))
	key := backendtest.Key(t)
	l := backendtest.MustAcquire(t, b, key, backend.AcquireOptions{TTL: 10 * time.Second, Holder: "h", RunID: "run-1"})
	defer l.Release(t.Context())
	if err := b.SetCheckpoint(t.Context(), key, l.Token(), []byte("batch 7")); err != nil {
		t.Fatal(err)
	}
	lagging := srvs[0].Client(t)
	old, err := lagging.Get(t.Context(), b.checkpointKey(key)).Result()
	if err != nil {
		t.Fatal(err)
	}
	if err := b.SetCheckpoint(t.Context(), key, l.Token(), []byte("batch 8")); err != nil {
		t.Fatal(err)
	}
	lagging.Set(t.Context(), b.checkpointKey(key), old, 0) // as if "batch 8" never reached it
	for range 30 {
		cp, ok, err := b.GetCheckpoint(t.Context(), key)
		if err != nil || !ok || string(cp.Value) != "batch 8" {
			t.Fatalf("GetCheckpoint = %q, %v, %v; want the latest, batch 8", cp.Value, ok, err)
		}
	}
}
