package server

import (
	"context"
	"sync"
	"time"

	"daskgo/comm"
)

// callerContext returns ctx, also cancelled (cause errPeerGone) once the
// peer of conn has hung up, checked every peerPollInterval; stop ends the
// checks. It is for handlers that wait on other peers on a caller's
// behalf (gather's get_data from workers): a caller that left must not
// keep its connection, and the connections to the workers, held until a
// worker that stopped answering comes back. distributed's handler would
// run on; nobody is left to read its reply. A nil conn (a handler called
// without one) gets ctx's own cancellation only.
//
// The checks run on timer callbacks, none of them after stop returns.
func callerContext(ctx context.Context, conn *comm.Conn) (context.Context, func()) {
	ctx, cancel := context.WithCancelCause(ctx)
	if conn == nil {
		return ctx, func() { cancel(nil) }
	}
	var mu sync.Mutex
	stopped := false
	var t *time.Timer
	check := func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if conn.PeerGone() {
			cancel(errPeerGone)
			return
		}
		t.Reset(peerPollInterval)
	}
	mu.Lock()
	t = time.AfterFunc(peerPollInterval, check)
	mu.Unlock()
	return ctx, func() {
		mu.Lock()
		stopped = true
		t.Stop()
		mu.Unlock()
		cancel(nil)
	}
}
