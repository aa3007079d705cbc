package sim

import "testing"

// engine_cpu_s is the raw sum less the clock's cost per Handle, and the
// per-task figure is that over the graph's tasks.
func TestEngineCPUClockCorrection(t *testing.T) {
	g := mustSynthetic(t, "tree:300")
	r := mustRun(t, g, Config{Workers: 3, Mode: "withholding"})
	if r.EngineClockNs <= 0 || r.EngineCPURawS <= 0 {
		t.Fatalf("clock cost %v ns, raw CPU %v s: not measured", r.EngineClockNs, r.EngineCPURawS)
	}
	want := max(r.EngineCPURawS-float64(r.EngineHandles)*r.EngineClockNs*1e-9, 0)
	if d := r.EngineCPUS - want; d > 1e-9 || d < -1e-9 {
		t.Errorf("engine_cpu_s %v, want raw %v less %d handles x %v ns = %v", r.EngineCPUS, r.EngineCPURawS, r.EngineHandles, r.EngineClockNs, want)
	}
	if per := r.EngineCPUS * 1e6 / float64(r.NTasks); per-r.EngineCPUUsPerTask > 1e-6 || r.EngineCPUUsPerTask-per > 1e-6 {
		t.Errorf("engine_cpu_us_per_task %v, want %v", r.EngineCPUUsPerTask, per)
	}
}
