package backendtest

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/lockrun/lockrun/backend"
)

// RunCheckpoints runs the checkpoint conformance tests on a backend whose
// Open returns a backend.Checkpointer.
func RunCheckpoints(t *testing.T, h Harness) {
	s := &suite{h: h}
	t.Run("CheckpointRoundTrip", s.checkpointRoundTrip)
	t.Run("OlderTokenAfterNewerGrantIsRefused", s.olderCheckpointRefused)
	t.Run("CheckpointNeedsALiveHolder", s.checkpointNeedsALiveHolder)
	t.Run("CheckpointLimits", s.checkpointLimits)
}

// checkpointer opens a client and fails the test when it keeps no
// checkpoints.
func (s *suite) checkpointer(t *testing.T) (backend.Backend, backend.Checkpointer) {
	t.Helper()
	b := s.open(t)
	c, ok := b.(backend.Checkpointer)
	if !ok {
		t.Fatalf("%T is not a backend.Checkpointer", b)
	}
	return b, c
}

// wantCheckpoint fails the test unless key's checkpoint is value, written
// with token.
func wantCheckpoint(t *testing.T, c backend.Checkpointer, key string, value []byte, token backend.Token) {
	t.Helper()
	cp, ok, err := c.GetCheckpoint(t.Context(), key)
	if err != nil || !ok || !bytes.Equal(cp.Value, value) || cp.Token != token {
		t.Fatalf("GetCheckpoint(%q) = %q token %v, found %v, err %v; want %q token %v", key, cp.Value, cp.Token, ok, err, value, token)
	}
}

func (s *suite) checkpointRoundTrip(t *testing.T) {
	b, c := s.checkpointer(t)
	key := Key(t)
	if _, ok, err := c.GetCheckpoint(t.Context(), key); ok || err != nil {
		t.Fatalf("checkpoint of a new key: found %v, err %v", ok, err)
	}
	l := s.mustAcquire(t, b, key, "a")
	// Binary and empty values pass unchanged.
	for _, v := range [][]byte{[]byte("batch 7 of 20"), {0, ' ', '\n', 0xff}, {}} {
		if err := c.SetCheckpoint(t.Context(), key, l.Token(), v); err != nil {
			t.Fatalf("SetCheckpoint(%q) by the holder: %v", v, err)
		}
		wantCheckpoint(t, c, key, v, l.Token())
	}
	if err := c.ClearCheckpoint(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := c.GetCheckpoint(t.Context(), key); ok || err != nil {
		t.Fatalf("after ClearCheckpoint: found %v, err %v", ok, err)
	}
	if err := c.ClearCheckpoint(t.Context(), key); err != nil {
		t.Errorf("clearing no checkpoint: %v", err)
	}
	l.Release(t.Context())
}

// olderCheckpointRefused is the zombie: a holder whose lock was taken over
// writes its checkpoint late, and must not overwrite the new holder's.
func (s *suite) olderCheckpointRefused(t *testing.T) {
	b, c := s.checkpointer(t)
	key := Key(t)
	old := s.mustAcquire(t, b, key, "old")
	if err := c.SetCheckpoint(t.Context(), key, old.Token(), []byte("old 1")); err != nil {
		t.Fatal(err)
	}
	if err := b.ForceRelease(t.Context(), key); err != nil {
		t.Fatal(err)
	}
	old.Release(t.Context()) // lets go of what the process holds (a flock); the lease is gone already
	nu := s.mustAcquire(t, b, key, "new")
	wantCheckpoint(t, c, key, []byte("old 1"), old.Token()) // the new holder resumes from it
	if err := c.SetCheckpoint(t.Context(), key, old.Token(), []byte("old 2")); !errors.Is(err, backend.ErrLost) {
		t.Fatalf("older token's checkpoint after a newer grant: %v, want ErrLost", err)
	}
	wantCheckpoint(t, c, key, []byte("old 1"), old.Token())
	if err := c.SetCheckpoint(t.Context(), key, nu.Token(), []byte("new 1")); err != nil {
		t.Fatal(err)
	}
	if err := c.SetCheckpoint(t.Context(), key, old.Token(), []byte("old 3")); !errors.Is(err, backend.ErrLost) {
		t.Fatalf("older token's checkpoint after the newer one's: %v, want ErrLost", err)
	}
	wantCheckpoint(t, c, key, []byte("new 1"), nu.Token())
	nu.Release(t.Context())
}

func (s *suite) checkpointNeedsALiveHolder(t *testing.T) {
	b, c := s.checkpointer(t)
	key := Key(t)
	l := s.mustAcquire(t, b, key, "a")
	if err := c.SetCheckpoint(t.Context(), key, l.Token()+1, []byte("x")); !errors.Is(err, backend.ErrLost) {
		t.Errorf("a token never issued: %v, want ErrLost", err)
	}
	if err := l.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := c.SetCheckpoint(t.Context(), key, l.Token(), []byte("x")); !errors.Is(err, backend.ErrLost) {
		t.Errorf("after release: %v, want ErrLost", err)
	}
	if _, ok, err := c.GetCheckpoint(t.Context(), key); ok || err != nil {
		t.Errorf("refused checkpoints stored something: found %v, err %v", ok, err)
	}
}

func (s *suite) checkpointLimits(t *testing.T) {
	b, c := s.checkpointer(t)
	key := Key(t)
	l := s.mustAcquire(t, b, key, "a")
	defer l.Release(t.Context())
	full := []byte(strings.Repeat("x", backend.MaxCheckpoint))
	if err := c.SetCheckpoint(t.Context(), key, l.Token(), full); err != nil {
		t.Fatalf("a checkpoint of MaxCheckpoint bytes: %v", err)
	}
	wantCheckpoint(t, c, key, full, l.Token())
	if err := c.SetCheckpoint(t.Context(), key, l.Token(), append(full, 'x')); !errors.Is(err, backend.ErrInvalidOptions) {
		t.Errorf("one byte over MaxCheckpoint: %v, want ErrInvalidOptions", err)
	}
	if err := c.SetCheckpoint(t.Context(), "bad key", l.Token(), nil); !errors.Is(err, backend.ErrInvalidKey) {
		t.Errorf("invalid key: %v, want ErrInvalidKey", err)
	}
}
