package sim

import "testing"

// The active memory manager in the simulator: the engine's AMMTick on its
// period (on by default, as in the real scheduler) and workers releasing
// the replicas it drops. dot-product is the workload where fetched copies
// of its random blocks pile up without it (scheduler/amm.go).
func TestAMMDropsReplicasInSimulatedRuns(t *testing.T) {
	g := seedGraph(t, "dot-product-small")
	for _, mode := range []string{"main", "withholding"} {
		on := mustRun(t, g, Config{Workers: 4, Threads: 1, Mode: mode, Seed: 1, Validate: true})
		off := mustRun(t, g, Config{Workers: 4, Threads: 1, Mode: mode, Seed: 1, Validate: true, NoAMM: true})
		if on.AMMIntervalS != 2 || off.AMMIntervalS != 0 {
			t.Errorf("%s: AMM interval recorded %v on, %v off", mode, on.AMMIntervalS, off.AMMIntervalS)
		}
		if on.ReplicasDropped == 0 || off.ReplicasDropped != 0 {
			t.Errorf("%s: replicas dropped %d with the AMM, %d without", mode, on.ReplicasDropped, off.ReplicasDropped)
		}
		if on.LeakedBytes != 0 || on.HolderMismatches != 0 {
			t.Errorf("%s: leaked %d bytes, %d holder mismatches", mode, on.LeakedBytes, on.HolderMismatches)
		}
		t.Logf("%s: peak %.3f GiB with the AMM (%d replicas dropped), %.3f without; makespan %.1f s vs %.1f",
			mode, float64(on.PeakClusterMemoryBytes)/(1<<30), on.ReplicasDropped,
			float64(off.PeakClusterMemoryBytes)/(1<<30), on.MakespanS, off.MakespanS)
	}
}
