package coord

import "fmt"

// Blocked RPCs. distributed's extensions (semaphore, multi-lock, event,
// variable, queue, publish) answer some RPCs only once something happens:
// they await an asyncio.Event or Condition, bounded by wait_for(timeout).
// The engine cannot block, so such a stimulus parks its ReplyTo id here and
// a later stimulus answers it. Time never enters as a clock: when a
// caller's timeout passes, its peer leaves, or the server stops, the outer
// ring sends CancelWait and the parked op gives its timeout answer (false,
// a TimeoutError, ...) as distributed's wait_for would.

// Call is embedded by stimuli that answer an RPC. ReplyTo names the caller
// (Outbox.Replies); 0 means nobody waits for the answer.
type Call struct {
	ReplyTo int64
}

// ReplyID is the RPC the stimulus answers; the outer ring sends None when
// Handle neither answered nor parked it.
func (c *Call) ReplyID() int64 { return c.ReplyTo }

// WaitEnd says why a parked RPC is given up.
type WaitEnd uint8

const (
	// WaitTimeout: the caller's timeout passed (wait_for raised TimeoutError).
	WaitTimeout WaitEnd = iota
	// WaitGone: the caller disconnected or the server is stopping; nobody
	// reads the answer, the engine only forgets the waiter.
	WaitGone
)

// CancelWait gives up a parked RPC. If the engine already answered it, it
// is a no-op: the answer stands (a lease granted just before the timeout
// is the caller's).
type CancelWait struct {
	ReplyTo int64
	Why     WaitEnd
}

// RemoteException is an RPC answer that the caller raises as
// Module.Class(Text) (distributed's error_message of a raised exception).
type RemoteException struct {
	Module, Class, Text string
}

func (e *RemoteException) Error() string { return fmt.Sprintf("%s: %s", e.Class, e.Text) }

func builtinError(class, format string, args ...any) *RemoteException {
	return &RemoteException{Module: "builtins", Class: class, Text: fmt.Sprintf(format, args...)}
}

// parked is one blocked RPC: cancel gives its timeout answer (or, for
// WaitGone, only removes it from its extension's waiter lists).
type parked struct {
	cancel func(why WaitEnd)
}

// park records that the RPC ReplyTo id will be answered later.
func (c *Coordinator) park(id int64, cancel func(why WaitEnd)) {
	if c.parkedRPCs == nil {
		c.parkedRPCs = map[int64]parked{}
	}
	c.parkedRPCs[id] = parked{cancel: cancel}
}

// answer replies to a parked (or not yet parked) RPC and forgets it.
func (c *Coordinator) answer(id int64, v any) {
	delete(c.parkedRPCs, id)
	if id != 0 {
		c.host.Reply(id, v)
	}
}

// Parked reports whether the RPC id waits for a later stimulus; the outer
// ring then does not answer it with None.
func (c *Coordinator) Parked(id int64) bool {
	_, ok := c.parkedRPCs[id]
	return ok
}

// NParked counts blocked RPCs (tests, metrics).
func (c *Coordinator) NParked() int { return len(c.parkedRPCs) }

func (c *Coordinator) cancelWait(x *CancelWait) {
	p, ok := c.parkedRPCs[x.ReplyTo]
	if !ok {
		return
	}
	delete(c.parkedRPCs, x.ReplyTo)
	p.cancel(x.Why)
}

// timeoutAnswer answers a cancelled waiter: v on a timeout, nothing when
// the caller is gone.
func (c *Coordinator) timeoutAnswer(id int64, why WaitEnd, v any) {
	if why == WaitTimeout {
		c.host.Reply(id, v)
	}
}

// SetReplyTo names the RPC the stimulus answers: the outer ring decodes a
// request into its stimulus before it opens the reply slot.
func (c *Call) SetReplyTo(id int64) { c.ReplyTo = id }
