package server

import (
	"context"
	"errors"
	"fmt"
	"time"

	"daskgo/comm"
	"daskgo/protocol"
	"daskgo/protocol/pickle"
	"daskgo/scheduler"
	"daskgo/scheduler/coord"
)

// Blocked RPCs (a Lock acquire, an Event wait, a Queue get...) are parked
// in the engine (scheduler/coord/waits.go) and answered by a later stimulus. The
// handler goroutine that serves the caller's connection waits for that
// answer here: the caller's timeout, the caller hanging up and shutdown end
// the wait. The engine decides the answer in every case (CancelWait), so a
// lease granted just as the timeout passes is reported, not leaked.

// errPeerGone ends a blocked RPC whose caller disconnected.
var errPeerGone = errors.New("the caller disconnected while waiting")

// peerPollInterval is how often a blocked RPC checks that its caller is
// still connected.
const peerPollInterval = 200 * time.Millisecond

// keyPollInterval is how often variable_set and queue_put look for a key
// that the client's update-graph has not yet defined (distributed polls
// scheduler.tasks every 10 ms as well).
const keyPollInterval = 10 * time.Millisecond

// callWait is loop.call for a stimulus the engine may park. timeout < 0
// means none.
func (l *loop) callWait(ctx context.Context, conn *comm.Conn, timeout time.Duration, mk func(replyTo int64) scheduler.Stimulus) (any, error) {
	id, ch := l.register()
	defer l.unregister(id)
	l.submit(mk(id))
	var deadline <-chan time.Time
	if timeout >= 0 { // 0 is blocking=False: the engine answers at once, or the timer cancels the wait
		deadline = l.srv.clock.After(timeout)
	}
	poll := l.srv.clock.NewTicker(peerPollInterval)
	defer poll.Stop()
	for {
		select {
		case v := <-ch:
			return rpcResult(v), nil
		case <-deadline:
			// the engine answers with its timeout value (or already has)
			deadline = nil
			l.submit(&scheduler.CoordOp{Base: l.srv.base("rpc-timeout"), Op: &coord.CancelWait{ReplyTo: id, Why: coord.WaitTimeout}})
		case <-poll.C():
			if conn != nil && conn.PeerGone() {
				l.submit(&scheduler.CoordOp{Base: l.srv.base("rpc-caller-gone"), Op: &coord.CancelWait{ReplyTo: id, Why: coord.WaitGone}})
				return nil, errPeerGone
			}
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-l.srv.ctx.Done():
			return nil, errShuttingDown
		}
	}
}

// callRPC is loop.call for stimuli answered at once, with the engine's
// exceptions turned into error replies.
func (l *loop) callRPC(ctx context.Context, mk func(replyTo int64) scheduler.Stimulus) (any, error) {
	v, err := l.call(ctx, mk)
	if err != nil {
		return nil, err
	}
	return rpcResult(v), nil
}

// rpcResult turns an engine answer into the reply: a RemoteException
// becomes distributed's error_message with the pickled exception, which
// the caller raises as that exception class.
func rpcResult(v any) any {
	e, ok := v.(*coord.RemoteException)
	if !ok {
		return v
	}
	text := fmt.Sprintf("%s(%q)", e.Class, e.Text)
	return protocol.NewMap(
		"status", "uncaught-error",
		"exception", pickle.Exception(e.Module, e.Class, e.Text),
		"traceback", nil,
		"exception_text", text,
		"traceback_text", "",
	)
}

// waitForKey waits until the engine knows key, as VariableExtension.set and
// QueueExtension.put poll scheduler.tasks: the client's update-graph,
// sent on its stream, may arrive after this RPC.
func (l *loop) waitForKey(ctx context.Context, key protocol.Key, timeout time.Duration) error {
	var stop time.Time
	if timeout >= 0 {
		stop = l.srv.clock.Now().Add(timeout)
	}
	for {
		known := false
		if err := l.query(ctx, func(st *scheduler.State) { known = st.Task(key) != nil }); err != nil {
			return err
		}
		if known {
			return nil
		}
		if !stop.IsZero() && l.srv.clock.Now().After(stop) {
			return &coord.RemoteException{Module: "builtins", Class: "TimeoutError",
				Text: fmt.Sprintf("Task %s unknown to scheduler.", key)}
		}
		select {
		case <-l.srv.clock.After(keyPollInterval):
		case <-ctx.Done():
			return ctx.Err()
		case <-l.srv.ctx.Done():
			return errShuttingDown
		}
	}
}
