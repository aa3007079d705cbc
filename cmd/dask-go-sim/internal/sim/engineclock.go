package sim

import (
	"fmt"
	"slices"
	"time"
)

// Engine clocks: how the simulator times the engine's intervals (every
// State.Handle with the Recycle before it, and the last Recycle).
//
//   - "thread": this thread's CPU clock read around every interval
//     (threadCPU). On Linux each read is a system call (about 0.55 µs
//     on the 2-core VM), and entering the kernel leaves the engine's
//     caches and branch predictors colder: replaying the reference run's
//     stimuli with those reads around each (BenchmarkEngineReplayClocks),
//     the engine's corrected in-interval time came out 0.42 µs per task
//     above the whole replay's time without them (medians of 3,
//     scripts/sim/results/engine-throughput.md). The clock correction
//     (readPairCost) subtracts the reads' own cost, not that.
//   - "wall-scaled" (the default): a monotonic clock read around every
//     interval, which the vDSO serves without entering the kernel (tens
//     of ns), and the thread's CPU clock read once per chunk of
//     chunkIntervals intervals. Each chunk's engine wall time is scaled by
//     the share of that chunk's wall time the thread was on a CPU, so
//     time the thread spent descheduled (a noisy neighbour, a collector
//     pause) counts in proportion. In the replay it measured 97 % of the
//     thread's whole CPU time, the loop and its clock reads being the
//     rest, and that whole time was the replay's without a clock, within
//     the rounds' spread.
//
// Neither counts the collector's background work on other threads.
const (
	clockThread     = "thread"
	clockWallScaled = "wall-scaled"
	chunkIntervals  = 4096
)

var monoEpoch = time.Now()

// mono is a monotonic clock reading (time.Since reads the runtime's
// nanotime, a vDSO call on Linux).
func mono() time.Duration { return time.Since(monoEpoch) }

// engineClock sums the engine's intervals. The zero value is unusable:
// make one with newEngineClock, and use it only from a goroutine locked to
// its OS thread (runtime.LockOSThread, as Run does): the thread's CPU
// clock counts whatever else runs on an unlocked goroutine's thread.
type engineClock struct {
	read  func() time.Duration
	mode  string
	cost  time.Duration // one back-to-back read pair, per interval
	sum   time.Duration // raw: reads included; scaled in wall-scaled mode
	timed int64         // intervals in sum

	// wall-scaled: the current chunk
	chunkWall   time.Duration
	wallSum     time.Duration // every chunk's wall time, unscaled
	chunkN      int
	cpu0, wall0 time.Duration
}

func newEngineClock(mode string) (*engineClock, error) {
	c := &engineClock{mode: mode}
	switch mode {
	case clockThread:
		c.read = threadCPU
	case clockWallScaled, "":
		c.mode, c.read = clockWallScaled, mono
	default:
		return nil, fmt.Errorf("engine clock %q: want %s or %s", mode, clockWallScaled, clockThread)
	}
	c.cost = readPairCost(c.read)
	c.cpu0, c.wall0 = threadCPU(), mono()
	return c, nil
}

// start begins an interval; pass its result to stop.
func (c *engineClock) start() time.Duration { return c.read() }

// stop ends the interval begun at t0.
func (c *engineClock) stop(t0 time.Duration) {
	d := c.read() - t0
	c.timed++
	if c.mode == clockThread {
		c.sum += d
		return
	}
	c.chunkWall += d
	if c.chunkN++; c.chunkN == chunkIntervals {
		c.flush()
	}
}

// flush scales the chunk's engine wall time by the share of the chunk's
// wall time this thread ran. Its two thread-clock reads fall between
// intervals.
func (c *engineClock) flush() {
	if c.mode == clockThread || c.chunkN == 0 {
		return
	}
	cpu, wall := threadCPU(), mono()
	onCPU := 1.0
	if dw := wall - c.wall0; dw > 0 {
		onCPU = min(float64(cpu-c.cpu0)/float64(dw), 1)
	}
	c.sum += time.Duration(float64(c.chunkWall) * onCPU)
	c.wallSum += c.chunkWall
	c.chunkWall, c.chunkN = 0, 0
	c.cpu0, c.wall0 = threadCPU(), mono()
}

// total is the engine's time: the raw sum less one read pair per interval.
func (c *engineClock) total() (corrected, raw time.Duration) {
	c.flush()
	return max(c.sum-time.Duration(c.timed)*c.cost, 0), c.sum
}

// readPairCost is what two back-to-back reads measure with nothing
// between them: the part of the reads themselves that every interval
// contains. The median of many pairs ignores the pairs a preemption or
// an interrupt lengthened.
func readPairCost(read func() time.Duration) time.Duration {
	const pairs = 2001
	d := make([]time.Duration, pairs)
	for i := range d {
		c0 := read()
		d[i] = read() - c0
	}
	slices.Sort(d)
	return d[pairs/2]
}
