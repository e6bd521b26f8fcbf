package etcd

import (
	"context"
	"fmt"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// keepAliveStream is one gRPC keep-alive stream, kept open from one call
// of keepAlive to the next: the client authenticates every stream it
// opens afresh (an Authenticate request, a password hash on the server),
// so a stream per renewal would cost that at every heartbeat.
type keepAliveStream struct {
	mu     sync.Mutex // one exchange at a time: replies come in order
	stream pb.Lease_LeaseKeepAliveClient
	cancel context.CancelFunc
}

// keepAlive sends exactly one keep-alive for id, waits for its answer and
// returns the TTL the lease restarted with (the one it was granted) and
// the header the answer came with (the store's cluster, term, revision). It
// uses the gRPC lease service on the client's connection rather than
// Lease.KeepAliveOnce, which retries "unavailable" answers (such as "no
// leader") in a tight loop until its context ends: the caller's heartbeat
// decides when to try again. The stream is marked require-leader, so a
// member cut off in a minority ends it at once instead of holding it. An
// exchange that fails or outlasts ctx drops the stream; the next call
// opens another.
func (b *Backend) keepAlive(ctx context.Context, id clientv3.LeaseID) (time.Duration, *pb.ResponseHeader, error) {
	ctx, cancel := b.bounded(ctx)
	defer cancel()
	s := &b.ka
	s.mu.Lock()
	defer s.mu.Unlock()
	stream, stop := s.stream, s.cancel
	s.stream, s.cancel = nil, nil // given back after a clean exchange only
	if stream == nil {
		var sctx context.Context
		sctx, stop = context.WithCancel(clientv3.WithRequireLeader(context.Background()))
		defer func() {
			if s.stream == nil {
				stop()
			}
		}()
		// Opening may wait for a connection or for authentication: bound
		// it by ctx, not by the stream's own, longer, life.
		opened := make(chan error, 1)
		go func() {
			var err error
			stream, err = b.leases.LeaseKeepAlive(sctx)
			opened <- err
		}()
		select {
		case err := <-opened:
			if err != nil {
				return 0, nil, err
			}
		case <-ctx.Done():
			return 0, nil, context.Cause(ctx)
		}
	}
	ttl, h, err := exchange(ctx, stream, id)
	if err != nil {
		stop()
		return 0, nil, err
	}
	s.stream, s.cancel = stream, stop
	if ttl <= 0 {
		return 0, nil, errLeaseGone
	}
	return ttl, h, nil
}

// exchange sends one keep-alive on stream and waits for its reply, or for
// ctx to end (the caller then drops the stream, which ends the wait).
func exchange(ctx context.Context, stream pb.Lease_LeaseKeepAliveClient, id clientv3.LeaseID) (time.Duration, *pb.ResponseHeader, error) {
	type reply struct {
		resp *pb.LeaseKeepAliveResponse
		err  error
	}
	done := make(chan reply, 1)
	go func() {
		if err := stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err != nil {
			done <- reply{err: err}
			return
		}
		resp, err := stream.Recv()
		done <- reply{resp, err}
	}()
	select {
	case r := <-done:
		switch {
		case r.err != nil:
			return 0, nil, r.err
		case r.resp.ID != int64(id):
			return 0, nil, fmt.Errorf("keep-alive for lease %x answered for lease %x", id, r.resp.ID)
		}
		return time.Duration(r.resp.TTL) * time.Second, r.resp.GetHeader(), nil
	case <-ctx.Done():
		return 0, nil, context.Cause(ctx)
	}
}

// close ends the stream, if one is open.
func (s *keepAliveStream) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		s.cancel()
		s.stream, s.cancel = nil, nil
	}
}
