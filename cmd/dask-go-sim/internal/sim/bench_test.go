package sim

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"daskgo/scheduler"
)

// BenchmarkEngineReplay times the engine alone on a simulated run: the
// stimuli of one run of the tree reduction on 1,000 workers (withholding,
// the reference of scripts/sim/README.md at a smaller size) are recorded,
// then replayed into a fresh engine per iteration, outboxes recycled as
// the real scheduler's loop does. No clock is read per stimulus and no
// simulator work runs between them, so this is a lower bound of the
// simulator's engine_cpu_us_per_task (whose caches the simulator also
// uses), and a profile of it (-cpuprofile) holds only engine work.
//
//	go test ./cmd/dask-go-sim/internal/sim -run XX -bench EngineReplay -benchmem
func BenchmarkEngineReplay(b *testing.B) {
	for _, workers := range []int{1000, 100} {
		spec := "tree:50000"
		b.Run(fmt.Sprintf("%s/workers=%d", spec, workers), func(b *testing.B) { benchEngineReplay(b, spec, workers) })
	}
}

// BenchmarkEngineReplay1M is the replay of the engine-throughput reference
// run itself (scripts/sim/engine-throughput.sh; tree:500000, 999,999
// tasks, on 1,000 workers): the engine's CPU per task without the
// simulator's clock reads and its own work between stimuli. About a minute; run it by name with -benchtime 1x.
func BenchmarkEngineReplay1M(b *testing.B) { benchEngineReplay(b, "tree:500000", 1000) }

// BenchmarkEngineReplayClocks replays the engine-throughput reference run as
// BenchmarkEngineReplay1M does, with each engine clock read around every
// stimulus as the simulator reads it (none, thread, wall-scaled), and
// reports the engine's time as that clock measured it (clock-ns/task,
// corrected for the reads' own cost) beside the thread's whole CPU time
// (cpu-ns/task). A clock that leaves the engine as it is measures about
// what the run without a clock spends (engineclock.go). Several minutes;
// run it by name with -benchtime 1x, under the measurement lock.
func BenchmarkEngineReplayClocks(b *testing.B) {
	g, stimuli, ecfg := recordReplay(b, "tree:500000", 1000)
	for _, mode := range []string{"none", clockThread, clockWallScaled} {
		b.Run(mode, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			var clock *engineClock
			if mode != "none" {
				var err error
				if clock, err = newEngineClock(mode); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			c0 := threadCPU()
			for range b.N {
				replay(ecfg, stimuli, clock)
			}
			tasks := float64(b.N * len(g.Tasks))
			b.ReportMetric(float64((threadCPU()-c0).Nanoseconds())/tasks, "cpu-ns/task")
			if clock != nil {
				engine, _ := clock.total()
				b.ReportMetric(float64(engine.Nanoseconds())/tasks, "clock-ns/task")
			}
		})
	}
}

// recordReplay runs spec on workers simulated workers once, recording
// every stimulus, and gives the engine configuration to replay them with.
func recordReplay(b testing.TB, spec string, workers int) (*Graph, []scheduler.Stimulus, scheduler.Config) {
	g, err := Synthetic(spec)
	if err != nil {
		b.Fatal(err)
	}
	var stimuli []scheduler.Stimulus
	cfg := Config{Workers: workers, Mode: "withholding", record: func(st scheduler.Stimulus) { stimuli = append(stimuli, st) }}
	if _, err := Run(g, cfg); err != nil {
		b.Fatal(err)
	}
	cfg.record = nil
	if err := cfg.fill(); err != nil {
		b.Fatal(err)
	}
	return g, stimuli, cfg.engineConfig()
}

// replay hands every stimulus to a fresh engine and each outbox back
// (Recycle), as the real loop does, each step timed on clock unless it is
// nil.
func replay(ecfg scheduler.Config, stimuli []scheduler.Stimulus, clock *engineClock) {
	eng := scheduler.New(ecfg)
	for _, st := range stimuli {
		var t0 time.Duration
		if clock != nil {
			t0 = clock.start()
		}
		out := eng.Handle(st)
		eng.Recycle(&out)
		// nothing keeps the messages: written, as the scheduler's loop says
		// once its streams have encoded them
		eng.MessagesWritten()
		if clock != nil {
			clock.stop(t0)
		}
	}
}

func benchEngineReplay(b *testing.B, spec string, workers int) {
	g, stimuli, ecfg := recordReplay(b, spec, workers)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.ReportAllocs()
	b.ResetTimer()
	c0 := threadCPU()
	for range b.N {
		replay(ecfg, stimuli, nil)
	}
	// thread CPU, as the simulator counts it: a busy machine's waits and
	// the collector's background work on other threads are not counted
	b.ReportMetric(float64((threadCPU()-c0).Nanoseconds())/float64(b.N*len(g.Tasks)), "cpu-ns/task")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(g.Tasks)), "ns/task")
	b.ReportMetric(float64(len(stimuli)), "stimuli")
}
