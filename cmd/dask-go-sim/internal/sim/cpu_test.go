package sim

import (
	"math"
	"testing"
)

// Processor sharing by hand: on one core, jobs of 1 s and 2 s started
// together each get half the core, so the short one ends at t=2 (1 s of
// CPU each), and the long one, alone for its last second, at t=3. A job
// started at t=2.5 on two cores beside it runs at full speed.
func TestCPUProcessorSharing(t *testing.T) {
	c := newCPU(1, false)
	c.start(0, 1, cpuJob{task: 1})
	c.start(0, 2, cpuJob{task: 2})
	at, ok := c.next()
	if !ok || math.Abs(at-2) > 1e-9 {
		t.Fatalf("first finish at %v (%v), want 2", at, ok)
	}
	done := c.finished(at)
	if len(done) != 1 || done[0].task != 1 || done[0].start != 0 {
		t.Fatalf("finished %+v, want task 1 started at 0", done)
	}
	if at, _ = c.next(); math.Abs(at-3) > 1e-9 {
		t.Fatalf("second finish at %v, want 3", at)
	}

	c = newCPU(2, false)
	c.start(0, 2, cpuJob{task: 1})
	c.start(0, 2, cpuJob{task: 2})
	c.start(1, 0.5, cpuJob{task: 3}) // three jobs on two cores: 2/3 each from t=1
	at, _ = c.next()
	if want := 1 + 0.5/(2.0/3); math.Abs(at-want) > 1e-9 {
		t.Fatalf("short job ends at %v, want %v", at, want)
	}
	if d := c.finished(at); len(d) != 1 || d[0].task != 3 {
		t.Fatalf("finished %+v, want task 3", d)
	}
	// tasks 1 and 2 had 1 + 0.5 s of CPU; their last 0.5 s at full speed
	if at, _ = c.next(); math.Abs(at-(1.75+0.5)) > 1e-9 {
		t.Fatalf("long jobs end at %v, want 2.25", at)
	}
}

// Eight independent 1 s tasks on 4 single-thread workers: two waves of 1 s
// on dedicated cores; on 2 shared cores four tasks run at half speed, so
// each wave takes 2 s. The final sum (0.01 s) and latencies add little.
func TestSharedCoresStretchTasks(t *testing.T) {
	g := mustSynthetic(t, "indep:8")
	dedicated := mustRun(t, g, Config{Workers: 4, Threads: 1, Mode: "withholding"})
	shared := mustRun(t, g, Config{Workers: 4, Threads: 1, Mode: "withholding", Cores: 2, Validate: true})
	if dedicated.MakespanS < 2 || dedicated.MakespanS > 2.1 {
		t.Errorf("dedicated cores: makespan %.3f s, want 2 waves of 1 s", dedicated.MakespanS)
	}
	if shared.MakespanS < 4 || shared.MakespanS > 4.1 {
		t.Errorf("2 shared cores: makespan %.3f s, want 2 waves of 2 s", shared.MakespanS)
	}
	if shared.LeakedBytes != 0 || shared.Cores != 2 {
		t.Errorf("shared: leaked %d, cores %v", shared.LeakedBytes, shared.Cores)
	}
}

// The per-task overhead is work like the task's own: 8 tasks of 1 s plus
// 0.5 s each take two waves of 1.5 s on dedicated cores, of 3 s on two
// shared ones.
func TestTaskOverhead(t *testing.T) {
	g := mustSynthetic(t, "indep:8")
	for _, c := range []struct{ cores, want float64 }{{0, 3}, {2, 6}} {
		r := mustRun(t, g, Config{Workers: 4, Threads: 1, Mode: "withholding", Cores: c.cores, TaskOverhead: 0.5})
		if r.MakespanS < c.want || r.MakespanS > c.want+0.6 { // + the sum's own overhead and latencies
			t.Errorf("cores %v: makespan %.3f s, want %.1f s + the final sum", c.cores, r.MakespanS, c.want)
		}
	}
}

// With shared cores a transfer is CPU work: once the 1 s tasks are done,
// only the sum's inputs move, all at once; each its own share of the 2
// cores without the interpreter lock, so the makespan grows by the
// transferred bytes' CPU seconds / 2 (plus the wait); with it they take
// turns on their destination's one share: CPU seconds / 1.
func TestTransferCPUOnSharedCores(t *testing.T) {
	g := mustSynthetic(t, "indep:8")
	base := Config{Workers: 4, Threads: 1, Mode: "withholding", Cores: 2, NoGIL: true}
	free := mustRun(t, g, base)
	costly := base
	costly.TransferCPUPerByte = 1.0 / (1 << 20) // 1 s of CPU per MiB
	costly.TransferWait = 0.25
	r := mustRun(t, g, costly)
	if r.TransferredBytes != free.TransferredBytes || r.TransferredBytes == 0 {
		t.Fatalf("transferred %d vs %d bytes: the placement should not change", r.TransferredBytes, free.TransferredBytes)
	}
	cpuS := float64(r.TransferredBytes) / (1 << 20)
	want := free.MakespanS + cpuS/2 + 0.25
	if math.Abs(r.MakespanS-want) > 0.05 {
		t.Errorf("makespan %.3f s, want %.3f (%.3f + %.0f s of transfer CPU on 2 cores + 0.25 s wait)",
			r.MakespanS, want, free.MakespanS, cpuS)
	}
	costly.NoGIL = false
	gil := mustRun(t, g, costly)
	if want := free.MakespanS + cpuS + 0.25; gil.TransferredBytes != r.TransferredBytes || math.Abs(gil.MakespanS-want) > 0.05 {
		t.Errorf("with the lock: makespan %.3f s (%d bytes moved), want %.3f (the transfers on one share)",
			gil.MakespanS, gil.TransferredBytes, want)
	}
}

// Under the interpreter lock the cores are divided among the workers'
// shares (their executing tasks, at least one each), and a worker's
// transfers take turns with its tasks: on 2 cores, worker 0 with a task and
// a transfer and worker 1 with a task hold 2 shares, so worker 1's task
// runs at full speed and worker 0's jobs at half; without the lock the
// three jobs run at 2/3 each.
func TestCPUInterpreterLock(t *testing.T) {
	for _, c := range []struct {
		gil              bool
		w0Task, transfer float64 // finish times
		w1Task           float64
	}{
		{gil: true, w0Task: 2, transfer: 2, w1Task: 1},
		{gil: false, w0Task: 1.5, transfer: 1.5, w1Task: 1.5},
	} {
		cp := newCPU(2, c.gil)
		cp.start(0, 1, cpuJob{w: 0, task: 1})
		cp.start(0, 1, cpuJob{w: 0, task: 2, transfer: true})
		cp.start(0, 1, cpuJob{w: 1, task: 3})
		got := map[int32]float64{}
		for len(got) < 3 {
			at, ok := cp.next()
			if !ok {
				t.Fatalf("gil %v: jobs left %v", c.gil, got)
			}
			for _, j := range cp.finished(at) {
				got[j.task] = at
			}
		}
		want := map[int32]float64{1: c.w0Task, 2: c.transfer, 3: c.w1Task}
		for k, v := range want {
			if math.Abs(got[k]-v) > 1e-9 {
				t.Errorf("gil %v: job %d ends at %v, want %v", c.gil, k, got[k], v)
			}
		}
	}
}
