package main

import (
	"testing"
	"time"

	"daskgo/compat"
)

// TestEngineConfigWorkStealing: the work-stealing keys of dask config reach
// the engine: on with a 1 s interval by default (distributed.yaml), off and
// faster when configured, also through DASK_ environment variables.
func TestEngineConfigWorkStealing(t *testing.T) {
	cases := []struct {
		env      []string
		off      bool
		interval time.Duration
	}{
		{[]string{}, false, time.Second},
		{[]string{"DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING=False"}, true, time.Second},
		{[]string{"DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING_INTERVAL=100ms"}, false, 100 * time.Millisecond},
	}
	for _, c := range cases {
		st, err := compat.LoadSchedulerSettings(compat.ConfigSources{Paths: []string{}, Env: c.env})
		if err != nil {
			t.Fatal(err)
		}
		ec := st.Engine
		if err := ec.Validate(); err != nil {
			t.Fatal(err)
		}
		if ec.NoWorkStealing != c.off || ec.WorkStealingInterval != c.interval {
			t.Errorf("env %v: off=%v interval=%v, want %v %v", c.env, ec.NoWorkStealing, ec.WorkStealingInterval, c.off, c.interval)
		}
		if ec.DefaultTaskDurations["rechunk-split"] != time.Microsecond {
			t.Errorf("env %v: default-task-durations not passed: %v", c.env, ec.DefaultTaskDurations)
		}
	}
}

// TestEngineConfigLogLengths: distributed.admin.low-level-log-length bounds
// the transition log (what Client.story reads) and the event topics, 1000
// by default as in distributed.yaml.
func TestEngineConfigLogLengths(t *testing.T) {
	for env, want := range map[string]int{"": 1000, "DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH=50000": 50000} {
		var vars []string
		if env != "" {
			vars = []string{env}
		}
		st, err := compat.LoadSchedulerSettings(compat.ConfigSources{Paths: []string{}, Env: vars})
		if err != nil {
			t.Fatal(err)
		}
		ec := st.Engine
		if ec.TransitionLogSize != want || ec.EventLogLength != want {
			t.Errorf("env %q: transition log %d, event topics %d, want %d", env, ec.TransitionLogSize, ec.EventLogLength, want)
		}
	}
}
