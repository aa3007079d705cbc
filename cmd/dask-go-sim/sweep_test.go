package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A sweep writes one record per run, skips runs already recorded (so an
// interrupted sweep resumes), and report merges them into latest.json and
// latest.md with the ratios to main.
func TestSweepResumesAndReports(t *testing.T) {
	dir := t.TempDir()
	args := []string{"-results", dir, "-scale", "synthetic", "-workloads", "tree:40,indep:30",
		"-workers", "2,3", "-modes", "main,coassign"}
	if err := cmdSweep(args); err != nil {
		t.Fatal(err)
	}
	runs, _ := filepath.Glob(filepath.Join(dir, "runs", "*.json"))
	if len(runs) != 8 {
		t.Fatalf("%d run files, want 8: %v", len(runs), runs)
	}
	first, _ := os.Stat(runs[0])
	time.Sleep(10 * time.Millisecond)
	if err := cmdSweep(args); err != nil {
		t.Fatal(err)
	}
	again, _ := os.Stat(runs[0])
	if !again.ModTime().Equal(first.ModTime()) {
		t.Errorf("%s was rewritten by the second sweep", runs[0])
	}
	if err := cmdReport([]string{"-results", dir, "-command", "dask-go-sim sweep ..."}); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "latest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var recs []map[string]any
	if err := json.Unmarshal(b, &recs); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 8 {
		t.Fatalf("%d records", len(recs))
	}
	for _, f := range []string{"workload", "n_workers", "mode", "n_tasks", "makespan_s", "peak_cluster_memory_bytes",
		"peak_worker_memory_bytes", "transferred_bytes", "engine_cpu_s"} {
		if _, ok := recs[0][f]; !ok {
			t.Errorf("latest.json records lack %q", f)
		}
	}
	if recs[0]["workload"] != "indep:30" || recs[0]["mode"] != "main" || recs[1]["mode"] != "coassign" {
		t.Errorf("records not sorted by workload, workers, mode: %v %v", recs[0]["workload"], recs[0]["mode"])
	}
	md, _ := os.ReadFile(filepath.Join(dir, "latest.md"))
	if !strings.Contains(string(md), "| tree:40 | synthetic | 79 | 3 | coassign |") || !strings.Contains(string(md), "1.00") {
		t.Errorf("latest.md:\n%s", md)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{"8GiB": 8 << 30, "500MB": 500e6, "1e9": 1e9, "2 KiB": 2048} {
		if got, err := parseBytes(in); err != nil || got != want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"", "x", "-1GiB", "0"} {
		if _, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%q) accepted", in)
		}
	}
}
