package coord

import (
	"time"

	"daskgo/protocol"
)

// Coordinator holds the coordination extensions of a scheduler: Lock and
// Semaphore (semaphore.go), MultiLock, Event, Variable, Queue, published
// datasets and the scheduler's metadata, and the RPCs they answer later
// (waits.go). The engine owns one and hands it every Op with the time it
// happened; the extensions reach the rest of the scheduler only through
// Host.
type Coordinator struct {
	host Host
	now  time.Time

	leaseValidationInterval time.Duration

	parkedRPCs map[int64]parked
	sem        semaphoreExt
	mlock      multiLockExt
	events     map[string]*event
	vars       variableExt
	squeues    sharedQueueExt
	publish    publishExt
	metadata   *protocol.Map
}

// Host is what the extensions need of the engine: answering RPCs, logging,
// and pseudo-clients (a variable's, a queue's, a dataset's) that hold
// futures alive by desiring their keys, exactly as a client does.
type Host interface {
	// Reply answers the RPC id (0: nobody waits) with v; a
	// *RemoteException is raised by the caller.
	Reply(id int64, v any)
	Logf(level LogLevel, key protocol.Key, worker, client, format string, args ...any)
	DesireKeys(keys []protocol.Key, client string)
	ReleaseKeys(keys []protocol.Key, client string)
	RemoveClient(client string)
	// FutureState is what a getter of a future is told of its task; known
	// is false for a key the scheduler does not hold.
	FutureState(key protocol.Key) (fs FutureState, known bool)
}

// FutureState is a task's state as a Variable or Queue getter sees it.
type FutureState struct {
	State                string
	Erred                bool
	Exception, Traceback any
}

// LogLevel is how loud a log entry is.
type LogLevel uint8

// Log levels, quietest first.
const (
	LogDebug LogLevel = iota
	LogInfo
	LogWarn
	LogError
)

// Op is one coordination RPC or stream op, decoded by the outer ring.
type Op interface{ coordOp() }

// New makes a Coordinator; leaseValidationInterval is how often semaphore
// leases are checked for timeouts
// (distributed.scheduler.locks.lease-validation-interval).
func New(host Host, leaseValidationInterval time.Duration) *Coordinator {
	return &Coordinator{host: host, leaseValidationInterval: leaseValidationInterval}
}

// Handle applies op at time now; false if op is not a coordination op.
func (c *Coordinator) Handle(op Op, now time.Time) bool {
	c.now = now
	if x, ok := op.(*CancelWait); ok {
		c.cancelWait(x)
		return true
	}
	return c.dispatchSemaphore(op) || c.dispatchMultiLock(op) || c.dispatchEvent(op) ||
		c.dispatchVariable(op) || c.dispatchQueue(op) || c.dispatchPublish(op) ||
		c.dispatchMetadata(op)
}

// Tick runs what time alone triggers: semaphore lease timeouts.
func (c *Coordinator) Tick(now time.Time) {
	c.now = now
	c.checkLeaseTimeouts()
}
