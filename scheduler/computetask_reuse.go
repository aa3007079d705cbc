package scheduler

// Reusing compute-task messages. A compute-task is the biggest message the
// engine builds, one per task sent (computeTaskMsg, about 700 bytes with
// its dependencies), and it is dead as soon as it is encoded. Replaying the
// 100k-task tree over 1,000 simulated workers, handing every task the same
// message object instead of a fresh one took the engine's allocations from
// 151 to 84 MB and its thread CPU per task down by about a tenth
// (BenchmarkEngineReplay): fewer collections, and the message written is
// one the cache already holds.
//
// Only the outer ring knows when a message has been encoded, so reuse is
// its call: MessagesWritten says that every message of every Outbox
// returned so far has been encoded and dropped. The engine then reuses the
// compute-tasks among them for later sends. A caller that keeps messages
// (transcripts, the simulator, which delivers them after a latency) never
// calls it, and every message stays fresh, as before.
//
// The engine remembers at most computeTaskReuseMax messages handed out
// between two calls and keeps at most that many for reuse: past it new
// messages are left to the collector, so a ring that cannot say "written"
// for a while (a stream held, a slow peer) costs nothing but the reuse.

const computeTaskReuseMax = 4096

// computeTaskReuse holds the compute-task messages handed out since the
// last MessagesWritten (sent*) and those free to build the next ones in
// (free*). A root task's message has no dependencies, so it is the smaller
// type; the two are kept apart.
type computeTaskReuse struct {
	sent, free         []*computeTaskMsg
	sentDeps, freeDeps []*computeTaskWithDeps
}

// MessagesWritten tells the engine that the outer ring has encoded every
// message of every Outbox Handle returned so far and holds none of them:
// the compute-tasks among them may be overwritten by later Handles. Calling
// it while a message may still be read corrupts that message.
func (s *State) MessagesWritten() {
	r := &s.ctReuse
	r.free = reclaimWritten(r.free, r.sent)
	r.sent = r.sent[:0]
	r.freeDeps = reclaimWritten(r.freeDeps, r.sentDeps)
	r.sentDeps = r.sentDeps[:0]
}

// reclaimWritten moves the written messages into free, up to the bound, and
// drops sent's pointers to them.
func reclaimWritten[T any](free, sent []*T) []*T {
	if room := computeTaskReuseMax - len(free); room > 0 {
		free = append(free, sent[:min(room, len(sent))]...)
	}
	clear(sent)
	return free
}

// rootMsg returns a zeroed compute-task without dependencies, reused when
// one is free, and remembers it as handed out.
func (r *computeTaskReuse) rootMsg() *computeTaskMsg {
	b := takeFree(&r.free)
	if len(r.sent) < computeTaskReuseMax {
		r.sent = append(r.sent, b)
	}
	return b
}

// depsMsg is rootMsg for a task with dependencies.
func (r *computeTaskReuse) depsMsg() *computeTaskWithDeps {
	b := takeFree(&r.freeDeps)
	if len(r.sentDeps) < computeTaskReuseMax {
		r.sentDeps = append(r.sentDeps, b)
	}
	return b
}

// takeFree pops a free message and zeroes it (it still points at the last
// task's key, spec and holders), or allocates one.
func takeFree[T any](free *[]*T) *T {
	n := len(*free)
	if n == 0 {
		return new(T)
	}
	b := (*free)[n-1]
	(*free)[n-1] = nil
	*free = (*free)[:n-1]
	var zero T
	*b = zero
	return b
}
