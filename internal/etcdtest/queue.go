package etcdtest

import (
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Entries are the keys under prefix, oldest first: for a lock, pass the
// lock's prefix (backend/etcd's prefix, the key, "/") to get its queue,
// holder first, as etcd's concurrency.Mutex orders it.
func Entries(t testing.TB, c *clientv3.Client, prefix string) []string {
	t.Helper()
	resp, err := c.Get(t.Context(), prefix, clientv3.WithPrefix(), clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, kv := range resp.Kvs {
		names = append(names, string(kv.Key))
	}
	return names
}

// WaitQueued waits up to 10 s until there are n entries under prefix.
func WaitQueued(t testing.TB, c *clientv3.Client, prefix string, n int) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(Entries(t, c, prefix)) != n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("%s has %v, want %d entries", prefix, Entries(t, c, prefix), n)
		}
	}
}
