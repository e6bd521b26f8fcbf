package redis

import "github.com/redis/go-redis/v9/logging"

// DisableClientLogs switches go-redis's logger off for the whole process.
// go-redis prints a failed dial and trouble in its connection pool to
// stderr, which lockrun shares with its command and keeps for its own
// one-line messages; every such failure also reaches lockrun as the error
// of the call that met it, so nothing is lost.
//
// It is process-wide because go-redis v9.23 offers nothing narrower: its
// Options have no logger, and redis.SetLogger and logging.Disable replace
// one package-level logger (a per-client logger is requested in
// redis/go-redis#3558). A program calls it once, before it opens a
// backend; lockrun's CLI does, when the backend URL is a Redis one.
func DisableClientLogs() { logging.Disable() }
