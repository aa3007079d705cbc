package sim

import "testing"

// engine_cpu_s is the raw sum less the clock's cost per timed interval
// (every Handle, and the Recycle after it where the outbox is handed back),
// and the per-task figure is that over the graph's tasks.
func TestEngineCPUClockCorrection(t *testing.T) {
	g := mustSynthetic(t, "tree:300")
	r := mustRun(t, g, Config{Workers: 3, Mode: "withholding"})
	if r.EngineClockNs <= 0 || r.EngineCPURawS <= 0 {
		t.Fatalf("clock cost %v ns, raw CPU %v s: not measured", r.EngineClockNs, r.EngineCPURawS)
	}
	if r.EngineTimed <= r.EngineHandles || r.EngineTimed > 2*r.EngineHandles {
		t.Fatalf("%d timed intervals for %d handles: want each Handle and each Recycle", r.EngineTimed, r.EngineHandles)
	}
	want := max(r.EngineCPURawS-float64(r.EngineTimed)*r.EngineClockNs*1e-9, 0)
	if d := r.EngineCPUS - want; d > 1e-9 || d < -1e-9 {
		t.Errorf("engine_cpu_s %v, want raw %v less %d intervals x %v ns = %v", r.EngineCPUS, r.EngineCPURawS, r.EngineTimed, r.EngineClockNs, want)
	}
	if per := r.EngineCPUS * 1e6 / float64(r.NTasks); per-r.EngineCPUUsPerTask > 1e-6 || r.EngineCPUUsPerTask-per > 1e-6 {
		t.Errorf("engine_cpu_us_per_task %v, want %v", r.EngineCPUUsPerTask, per)
	}
}
