package scheduler

// Reusing written messages. The engine's two per-task worker messages, a
// compute-task (computeTaskMsg, about 700 bytes with its dependencies) and
// the free-keys that releases its result (freeTaskMsg), are dead as soon as
// they are encoded. Replaying the 100k-task tree over 1,000 simulated
// workers, building every compute-task in one reused object instead of a
// fresh one took the engine's allocations from 151 to 84 MB and its thread
// CPU per task down by about a tenth (BenchmarkEngineReplay): fewer
// collections, and the message written is one the cache already holds.
//
// Only the outer ring knows when a message has been encoded, so reuse is
// its call: MessagesWritten says that every message of every Outbox
// returned so far has been encoded and dropped. The engine then builds
// later messages of these kinds in the objects of those among them. A
// caller that keeps messages (transcripts) never calls it, and every
// message stays fresh, as before.
//
// The engine remembers at most messageReuseMax messages of each kind
// handed out between two calls and keeps at most that many for reuse: past
// it new messages are left to the collector, so a ring that cannot say
// "written" for a while (a stream held, a slow peer) costs nothing but the
// reuse.

const messageReuseMax = 4096

// messageReuse holds, per kind, the messages handed out since the last
// MessagesWritten and those free to build the next ones in. A root task's
// compute-task has no dependencies, so it is the smaller type; the two are
// kept apart.
type messageReuse struct {
	compute     reuseList[computeTaskMsg]
	computeDeps reuseList[computeTaskWithDeps]
	freeTask    reuseList[freeTaskMsg]
}

// reuseList is one kind's messages: sent (handed out, maybe not written
// yet) and free (written, to be built in again).
type reuseList[T any] struct {
	sent, free []*T
}

// MessagesWritten tells the engine that the outer ring has encoded every
// message of every Outbox Handle returned so far and holds none of them:
// the compute-tasks and free-keys among them may be overwritten by later
// Handles. Calling it while a message may still be read corrupts that
// message.
func (s *State) MessagesWritten() {
	r := &s.reuse
	r.compute.written()
	r.computeDeps.written()
	r.freeTask.written()
}

// written moves the written messages into free, up to the bound, and
// drops sent's pointers to them.
func (l *reuseList[T]) written() {
	if len(l.sent) == 0 {
		return // most Handles send one or two of the three kinds
	}
	if room := messageReuseMax - len(l.free); room > 0 {
		l.free = append(l.free, l.sent[:min(room, len(l.sent))]...)
	}
	clear(l.sent)
	l.sent = l.sent[:0]
}

// get returns a zeroed message, built in a written one when there is one,
// and remembers it as handed out.
func (l *reuseList[T]) get() *T {
	var b *T
	if n := len(l.free); n > 0 {
		b = l.free[n-1]
		l.free[n-1] = nil
		l.free = l.free[:n-1]
		var zero T
		*b = zero // it still points at the last task's key, spec and holders
	} else {
		b = new(T)
	}
	if len(l.sent) < messageReuseMax {
		l.sent = append(l.sent, b)
	}
	return b
}
