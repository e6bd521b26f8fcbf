package redis

import (
	"strings"
	"testing"

	goredis "github.com/redis/go-redis/v9"

	"github.com/lockrun/lockrun/internal/redistest"
)

// fenceClient is a plain client of a private server on which Init loaded
// the fence library (twice: it is safe to repeat).
func fenceClient(t *testing.T) *goredis.Client {
	t.Helper()
	srv := redistest.Start(t)
	b := open(t, srv.URL())
	for range 2 {
		if err := b.Init(t.Context()); err != nil {
			t.Fatalf("init: %v", err)
		}
	}
	return srv.Client(t)
}

func fcall(t *testing.T, c *goredis.Client, fn string, keys []string, args ...any) (any, error) {
	t.Helper()
	return c.FCall(t.Context(), fn, keys, args...).Result()
}

// wantFenced fails the test unless err is the fence's refusal.
func wantFenced(t *testing.T, err error, what string) {
	t.Helper()
	if err == nil || !strings.HasPrefix(err.Error(), FenceError+" ") {
		t.Fatalf("%s: err %v, want an error starting with %s", what, err, FenceError)
	}
}

func TestFenceFunctionRefusesOlderTokens(t *testing.T) {
	c := fenceClient(t)
	keys := []string{"fence:{invoices}"}
	if v, err := fcall(t, c, "lockrun_fence", keys, "200"); err != nil || v != "200" {
		t.Fatalf("first token: %v, %v", v, err)
	}
	if _, err := fcall(t, c, "lockrun_fence", keys, "0200"); err != nil {
		t.Fatalf("the same token again must pass: %v", err)
	}
	_, err := fcall(t, c, "lockrun_fence", keys, "199")
	wantFenced(t, err, "older token")
	if !strings.Contains(err.Error(), "199") || !strings.Contains(err.Error(), "200") {
		t.Errorf("message %q should name both tokens", err)
	}
	if _, err := fcall(t, c, "lockrun_fence", []string{"fence:{other}"}, "1"); err != nil {
		t.Errorf("another resource has its own fence: %v", err)
	}
	for _, bad := range []string{"", "-1", "1.5", "1e3", "18446744073709551616", " 5"} {
		if _, err := fcall(t, c, "lockrun_fence", keys, bad); err == nil || !strings.Contains(err.Error(), "decimal uint64") {
			t.Errorf("token %q: err %v, want a refusal of the token", bad, err)
		}
	}
}

// TestFenceFunctionIsExactAbove2To53 uses pairs that are one apart but the
// same double: compared as Lua numbers, the older one would pass.
func TestFenceFunctionIsExactAbove2To53(t *testing.T) {
	c := fenceClient(t)
	pairs := [][2]string{
		{"9007199254740993", "9007199254740992"},
		{"18446744073709551615", "18446744073709551614"},
		{"1000000000000000000", "999999999999999999"},
	}
	for i, p := range pairs {
		keys := []string{"fence:" + p[0]}
		if _, err := fcall(t, c, "lockrun_fence", keys, p[0]); err != nil {
			t.Fatalf("pair %d newer: %v", i, err)
		}
		_, err := fcall(t, c, "lockrun_fence", keys, p[1])
		wantFenced(t, err, "token "+p[1]+" after "+p[0])
	}
}

func TestFencedSetWritesOnlyWithTheNewestToken(t *testing.T) {
	c := fenceClient(t)
	keys := []string{"fence:{acct}", "{acct}:balance"}
	if _, err := fcall(t, c, "lockrun_fenced_set", keys, "300", "10", "PX", "60000"); err != nil {
		t.Fatal(err)
	}
	if ttl := c.PTTL(t.Context(), keys[1]).Val(); ttl <= 0 {
		t.Errorf("SET options were not passed on: PTTL %v", ttl)
	}
	_, err := fcall(t, c, "lockrun_fenced_set", keys, "299", "stale")
	wantFenced(t, err, "older token")
	if v := c.Get(t.Context(), keys[1]).Val(); v != "10" {
		t.Errorf("value is %q after the refused write, want 10", v)
	}
	if v := c.Get(t.Context(), keys[0]).Val(); v != "300" {
		t.Errorf("fence is %q, want 300", v)
	}
}
