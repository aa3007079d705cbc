package server

import (
	"os"
	"testing"
)

// range_query(start) answers the values since sample number start, at
// most what is kept, and nothing for a start at or past the count, as
// distributed's SystemMonitor.range_query does; count keeps growing past
// the kept length.
func TestSysMonitorRangeQuery(t *testing.T) {
	m := &sysMonitor{series: make([][]float64, len(sysMonitorNames))}
	pids := []int{os.Getpid()}
	for range 5 {
		m.sampleLocked(pids)
	}
	for _, c := range []struct {
		start int64
		want  int
	}{{0, 5}, {3, 2}, {4, 1}, {5, 0}, {9, 0}, {-3, 5}} {
		start := c.start
		if got := len(m.rangeLocked(0, &start)); got != c.want {
			t.Errorf("range_query(%d): %d values, want %d", c.start, got, c.want)
		}
	}
	if m.count != 5 {
		t.Fatalf("count %d", m.count)
	}
	m.series[0] = m.series[0][2:] // as if only 3 were kept
	start := int64(0)
	if got := len(m.rangeLocked(0, &start)); got != 3 {
		t.Errorf("range_query(0) past the kept length: %d values, want 3", got)
	}
	if mem := m.series[1][len(m.series[1])-1]; mem < 1<<20 {
		t.Errorf("memory of this process: %v bytes", mem)
	}
	if fds := m.series[5][0]; fds < 3 {
		t.Errorf("num_fds %v", fds)
	}
}
