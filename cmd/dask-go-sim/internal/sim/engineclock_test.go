package sim

import (
	"runtime"
	"strings"
	"testing"
	"time"
)

// engine_cpu_s is the raw sum less the clock's cost per timed interval
// (every Handle, and the Recycle after it where the outbox is handed back),
// and the per-task figure is that over the graph's tasks, on either clock.
func TestEngineCPUClockCorrection(t *testing.T) {
	g := mustSynthetic(t, "tree:300")
	for _, mode := range []string{"", clockThread} {
		r := mustRun(t, g, Config{Workers: 3, Mode: "withholding", EngineClock: mode})
		want := map[string]string{"": clockWallScaled, clockThread: clockThread}[mode]
		if r.EngineClock != want {
			t.Errorf("engine clock %q: recorded %q, want %q", mode, r.EngineClock, want)
		}
		if r.EngineClockNs <= 0 || r.EngineCPURawS <= 0 {
			t.Fatalf("%s: clock cost %v ns, raw CPU %v s: not measured", want, r.EngineClockNs, r.EngineCPURawS)
		}
		if r.EngineTimed <= r.EngineHandles || r.EngineTimed > 2*r.EngineHandles {
			t.Fatalf("%s: %d timed intervals for %d handles: want each Handle and each Recycle", want, r.EngineTimed, r.EngineHandles)
		}
		wantCPU := max(r.EngineCPURawS-float64(r.EngineTimed)*r.EngineClockNs*1e-9, 0)
		if d := r.EngineCPUS - wantCPU; d > 1e-9 || d < -1e-9 {
			t.Errorf("%s: engine_cpu_s %v, want raw %v less %d intervals x %v ns = %v", want, r.EngineCPUS, r.EngineCPURawS, r.EngineTimed, r.EngineClockNs, wantCPU)
		}
		if per := r.EngineCPUS * 1e6 / float64(r.NTasks); per-r.EngineCPUUsPerTask > 1e-6 || r.EngineCPUUsPerTask-per > 1e-6 {
			t.Errorf("%s: engine_cpu_us_per_task %v, want %v", want, r.EngineCPUUsPerTask, per)
		}
	}
}

// The wall-scaled clock counts an interval's wall time in the share its
// chunk spent on a CPU: a chunk during which the thread slept counts
// less than its wall time, never more, and chunks are flushed every
// chunkIntervals intervals and at the end.
func TestWallScaledClockScalesByTheChunksTimeOnCPU(t *testing.T) {
	// as Run does: the thread's clock is this goroutine's only while it
	// keeps the thread (unlocked, the sleeping goroutine's thread ran
	// other tests' goroutines under -race and its clock counted them)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	c, err := newEngineClock(clockWallScaled)
	if err != nil {
		t.Fatal(err)
	}
	t0 := c.start()
	time.Sleep(20 * time.Millisecond) // off CPU, inside the interval
	c.stop(t0)
	if c.chunkN != 1 || c.chunkWall < 20*time.Millisecond {
		t.Fatalf("after one interval: %d in the chunk, %v of wall time", c.chunkN, c.chunkWall)
	}
	_, raw := c.total()
	if c.chunkN != 0 {
		t.Fatalf("total left %d intervals unflushed", c.chunkN)
	}
	if raw >= 10*time.Millisecond {
		t.Errorf("a 20 ms sleep counted as %v of engine time: the chunk's time off CPU was not scaled away", raw)
	}
	for range chunkIntervals {
		c.stop(c.start())
	}
	if c.chunkN != 0 || c.timed != chunkIntervals+1 {
		t.Errorf("after %d more intervals: %d unflushed, %d timed", chunkIntervals, c.chunkN, c.timed)
	}
}

func TestUnknownEngineClockIsRefused(t *testing.T) {
	_, err := Run(mustSynthetic(t, "tree:4"), Config{Workers: 2, Mode: "withholding", EngineClock: "rdtsc"})
	if err == nil || !strings.Contains(err.Error(), `engine clock "rdtsc"`) {
		t.Fatalf("Run with engine clock rdtsc: err %v, want one naming it", err)
	}
}
