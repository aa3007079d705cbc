package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// record is a run file as written by sweep: a sim.Result, or an error.
type record map[string]any

func (r record) str(k string) string { s, _ := r[k].(string); return s }
func (r record) num(k string) float64 {
	f, _ := r[k].(float64)
	return f
}

var modeRank = map[string]int{"off": 0, "main": 1, "withholding": 2, "coassign": 3}

// cmdReport merges RESULTS/runs/*.json into latest.json (one record per
// run) and latest.md (the table). Plots: scripts/sim/plot.py.
func cmdReport(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	results := fs.String("results", "scripts/sim/results", "results directory")
	command := fs.String("command", "", "the command that made the runs, quoted in latest.md")
	_ = fs.Parse(args)
	files, err := filepath.Glob(filepath.Join(*results, "runs", "*.json"))
	if err != nil {
		return fmt.Errorf("list runs: %w", err)
	}
	recs := make([]record, 0, len(files))
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return fmt.Errorf("read %s: %w", f, err)
		}
		var r record
		if err := json.Unmarshal(b, &r); err != nil {
			return fmt.Errorf("decode %s: %w", f, err)
		}
		recs = append(recs, r)
	}
	sort.SliceStable(recs, func(i, j int) bool {
		a, b := recs[i], recs[j]
		if a.str("workload") != b.str("workload") {
			return a.str("workload") < b.str("workload")
		}
		if a.str("scale") != b.str("scale") {
			return a.str("scale") < b.str("scale")
		}
		if a.num("n_workers") != b.num("n_workers") {
			return a.num("n_workers") < b.num("n_workers")
		}
		return modeRank[a.str("mode")] < modeRank[b.str("mode")]
	})
	if err := writeJSON(filepath.Join(*results, "latest.json"), recs); err != nil {
		return err
	}
	md := markdown(recs, *command)
	if err := os.WriteFile(filepath.Join(*results, "latest.md"), []byte(md), 0o644); err != nil {
		return fmt.Errorf("write latest.md: %w", err)
	}
	fmt.Fprintf(os.Stderr, "%d runs -> %s/latest.{json,md}\n", len(recs), *results)
	return nil
}

func markdown(recs []record, command string) string {
	var b strings.Builder
	b.WriteString("# Simulated runs: the real engine, simulated workers\n\n")
	if command != "" {
		fmt.Fprintf(&b, "Made with:\n\n    %s\n\n", command)
	}
	b.WriteString("Memory in GiB; \"vs main\" = this mode / main (no withholding, distributed's co-location) on the same workload and cluster. " +
		"Spilled = bytes the workers spilled to disk (past 60 % of their limit in data, or 70 % in process memory at a check " +
		"of the memory monitor; spilling takes no simulated time). " +
		"Engine = CPU time inside State.Handle (thread clock).\n\n")
	b.WriteString("| workload | scale | tasks | workers | mode | makespan s | vs main | peak cluster | vs main | peak worker | over limit | spilled | transferred | engine s | µs/task |\n")
	b.WriteString("|---|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	base := map[string]record{}
	for _, r := range recs {
		if r.str("mode") == "main" && r.str("error") == "" {
			base[groupKey(r)] = r
		}
	}
	for _, r := range recs {
		if e := r.str("error"); e != "" {
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %s | failed: %s | | | | | | | | | |\n",
				r.str("workload"), r.str("scale"), r.num("n_tasks"), r.num("n_workers"), r.str("mode"), e)
			continue
		}
		off := base[groupKey(r)]
		fmt.Fprintf(&b, "| %s | %s | %.0f | %.0f | %s | %.1f | %s | %.2f | %s | %.2f | %.0f | %.2f | %.2f | %.2f | %.1f |\n",
			r.str("workload"), r.str("scale"), r.num("n_tasks"), r.num("n_workers"), r.str("mode"),
			r.num("makespan_s"), ratio(r, off, "makespan_s"),
			r.num("peak_cluster_memory_bytes")/(1<<30), ratio(r, off, "peak_cluster_memory_bytes"),
			r.num("peak_worker_memory_bytes")/(1<<30), r.num("workers_over_limit"),
			r.num("spilled_bytes")/(1<<30), r.num("transferred_bytes")/(1<<30), r.num("engine_cpu_s"), r.num("engine_cpu_us_per_task"))
	}
	return b.String()
}

func groupKey(r record) string {
	return fmt.Sprintf("%s/%s/%.0f", r.str("workload"), r.str("scale"), r.num("n_workers"))
}

func ratio(r, off record, k string) string {
	if off == nil || off.num(k) == 0 {
		return ""
	}
	return fmt.Sprintf("%.2f", r.num(k)/off.num(k))
}
