package compat

import (
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"daskgo/scheduler"
)

func writeFile(t *testing.T, path, text string) string {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func load(t *testing.T, src ConfigSources) SchedulerSettings {
	t.Helper()
	s, err := LoadSchedulerSettings(src)
	if err != nil {
		t.Fatalf("load settings: %v", err)
	}
	return s
}

// TestSettingsDefaults: with no file and no variable the settings are
// DefaultSettings, after the trip through viper's defaults and the
// readers; and distributed's own distributed.yaml layered over them
// changes nothing, so the defaults are distributed's.
func TestSettingsDefaults(t *testing.T) {
	want := DefaultSettings()
	got := load(t, ConfigSources{Paths: []string{}, Env: []string{}})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("defaults:\n got  %+v\n want %+v", got, want)
	}
	// spot checks against distributed.yaml's text, in case both sides move
	e := got.Engine
	if e.WorkerSaturation != 1.1 || e.AllowedFailures != 3 || e.WorkerTTL != 5*time.Minute ||
		e.NoWorkersTimeout != scheduler.Never || got.IdleTimeout != scheduler.Never || e.Bandwidth != 100e6 ||
		e.DefaultDataSize != 1024 || e.NoWorkStealing || e.NoActiveMemoryManager || e.NoAMMPolicy ||
		e.TransitionLogSize != 1000 || e.EventLogLength != 1000 || got.TaskStreamLength != 1000 ||
		got.ConnectTimeout != 30*time.Second || got.TLS.MinVersion != 1.2 || got.DefaultScheme != "tcp" {
		t.Fatalf("defaults differ from distributed.yaml: %+v", got)
	}
	yml := filepath.Join("..", ".venv", "lib", "python3.11", "site-packages", "distributed", "distributed.yaml")
	if _, err := os.Stat(yml); err != nil {
		t.Fatalf("need the virtualenv's distributed.yaml (run scripts/setup.sh): %v", err)
	}
	got = load(t, ConfigSources{Paths: []string{yml}, Env: []string{}})
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("distributed.yaml differs from built-in defaults:\n got  %+v\n want %+v", got, want)
	}
}

// TestConfigPrecedence builds every source and peels them off from the top:
// env > --config > $DASK_CONFIG > ~/.config/dask > $DASK_ROOT_CONFIG.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	home := filepath.Join(dir, "home")
	t.Setenv("HOME", home)
	root := filepath.Join(dir, "etc-dask")
	writeFile(t, filepath.Join(root, "a.yaml"), `
distributed:
  scheduler:
    worker-saturation: 2.0
    allowed-failures: 7
    bandwidth: 5MB
`)
	writeFile(t, filepath.Join(root, "b.yml"), "distributed: {scheduler: {allowed-failures: 8}}\n")
	writeFile(t, filepath.Join(root, "ignored.txt"), "distributed: {scheduler: {allowed-failures: 99}}\n")
	writeFile(t, filepath.Join(home, ".config", "dask", "dask.yaml"),
		"distributed:\n  scheduler:\n    worker_saturation: 3.0\n    work_stealing: no\n")
	daskConfig := writeFile(t, filepath.Join(dir, "conf", "x.json"),
		`{"distributed": {"scheduler": {"worker-saturation": 4.0, "rootish-taskgroup": 9}}}`)
	explicit := writeFile(t, filepath.Join(dir, "explicit.yaml"),
		"distributed:\n  scheduler:\n    worker-saturation: .inf\n")
	env := []string{
		"DASK_ROOT_CONFIG=" + root,
		"DASK_CONFIG=" + filepath.Dir(daskConfig),
		"DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION=6.0",
	}
	steps := []struct {
		src  ConfigSources
		want float64
	}{
		{ConfigSources{File: explicit, Env: env}, 6.0},
		{ConfigSources{File: explicit, Env: env[:2]}, math.Inf(1)},
		{ConfigSources{Env: env[:2]}, 4.0},
		{ConfigSources{Env: env[:1]}, 3.0},
		{ConfigSources{Env: []string{"DASK_ROOT_CONFIG=" + root}, Paths: []string{root}}, 2.0},
	}
	for i, st := range steps {
		got := load(t, st.src)
		if got.Engine.WorkerSaturation != st.want {
			t.Errorf("step %d: worker-saturation %v, want %v", i, got.Engine.WorkerSaturation, st.want)
		}
		// Lower layers still show through where nothing overrides them.
		if got.Engine.AllowedFailures != 8 || got.Engine.Bandwidth != 5_000_000 {
			t.Errorf("step %d: allowed-failures %d bandwidth %v, want 8 (b.yml over a.yaml) and 5MB",
				i, got.Engine.AllowedFailures, got.Engine.Bandwidth)
		}
		if wantRootish := map[bool]int{true: 9, false: 5}[i <= 2]; got.Engine.RootishTaskgroup != wantRootish {
			t.Errorf("step %d: rootish-taskgroup %d, want %d", i, got.Engine.RootishTaskgroup, wantRootish)
		}
		if wantSteal := i == 4; got.Engine.NoWorkStealing == wantSteal {
			t.Errorf("step %d: work-stealing %v, want %v (YAML 1.1 'no' in home)", i, !got.Engine.NoWorkStealing, wantSteal)
		}
	}
}

func TestConfigSearchPaths(t *testing.T) {
	t.Setenv("HOME", "/home/u")
	got := ConfigSearchPaths([]string{"DASK_CONFIG=/etc/dask"})
	want := []string{"/home/u/.config/dask", "/etc/dask"} // a duplicate keeps its last place
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("paths %v, want %v", got, want)
	}
	got = ConfigSearchPaths([]string{"DASK_ROOT_CONFIG=/opt/dask"})
	if want := []string{"/opt/dask", "/home/u/.config/dask"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("paths %v, want %v", got, want)
	}
}

func TestInterpretEnvValue(t *testing.T) {
	for in, want := range map[string]any{
		"1.0": 1.0, "1e3": 1000.0, "-2": int64(-2), "0x10": int64(16), "1_000": int64(1000),
		"inf": "inf", "007": "007", "True": true, "true": true, "FALSE": false,
		"None": nil, "null": nil, "'abc'": "abc", `"a b"`: "a b", "5 minutes": "5 minutes",
		"[1, 'x']": []any{1, "x"}, "(1, 2)": []any{1, 2}, "{'a': 1}": map[string]any{"a": 1},
		"[unclosed": "[unclosed",
	} {
		if got := interpretValue(in); !reflect.DeepEqual(got, want) {
			t.Errorf("interpretValue(%q) = %#v, want %#v", in, got, want)
		}
	}
}

func TestEnvSettings(t *testing.T) {
	env := func(kv ...string) ConfigSources { return ConfigSources{Paths: []string{}, Env: kv} }
	s := load(t, env(
		"DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION=inf",
		"DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL=None",
		"DASK_DISTRIBUTED__SCHEDULER__ROOT_TASK_CO_ASSIGNMENT=True",
		"DASK_DISTRIBUTED__SCHEDULER__UNKNOWN_TASK_DURATION=2 minutes",
		"DASK_DISTRIBUTED__SCHEDULER__DEFAULT_DATA_SIZE=1 MiB",
		"DASK_DISTRIBUTED__SCHEDULER__DEFAULT_TASK_DURATIONS__MY_FUNC=3h",
		"DASK_DISTRIBUTED__COMM__COMPRESSION=auto",
		"DASK_DISTRIBUTED__COMM__TIMEOUTS__CONNECT=5",
		"NOT_DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=1",
	))
	e := s.Engine
	if !math.IsInf(e.WorkerSaturation, 1) || e.WorkerTTL != scheduler.Never || !e.RootTaskCoAssignment ||
		e.UnknownTaskDuration != 2*time.Minute || e.DefaultDataSize != 1<<20 ||
		s.CommCompression != "lz4" || s.ConnectTimeout != 5*time.Second || e.AllowedFailures != 3 {
		t.Fatalf("settings %+v", s)
	}
	// A new prefix keeps its underscore (no existing spelling to adopt);
	// distributed's own keys take the dashed spelling of the defaults.
	if e.DefaultTaskDurations["my_func"] != 3*time.Hour || e.DefaultTaskDurations["rechunk-split"] != time.Microsecond {
		t.Fatalf("default-task-durations %v", e.DefaultTaskDurations)
	}
	// A list from the environment is a Python literal, as
	// dask.config.collect_env reads it: how a Kubernetes pod turns the API on.
	s = load(t, env(`DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES=["distributed.http.scheduler.api", "distributed.http.health"]`))
	if !reflect.DeepEqual(s.HTTPRoutes, []string{"distributed.http.scheduler.api", "distributed.http.health"}) {
		t.Fatalf("http.routes %q", s.HTTPRoutes)
	}
	if _, err := LoadSchedulerSettings(env("DASK_DISTRIBUTED__SCHEDULER__HTTP__ROUTES=5")); err == nil ||
		!strings.Contains(err.Error(), "distributed.scheduler.http.routes") {
		t.Fatalf("routes = 5: %v", err)
	}
	// Keys whose default is null take dask's spelling too ("_" lands on "-").
	s = load(t, env("DASK_DISTRIBUTED__SCHEDULER__NO_WORKERS_TIMEOUT=3s", "DASK_DISTRIBUTED__SCHEDULER__IDLE_TIMEOUT=90",
		"DASK_DISTRIBUTED__SCHEDULER__CONNECTION_LIMIT=64"))
	if s.Engine.NoWorkersTimeout != 3*time.Second || s.IdleTimeout != 90*time.Second || s.ConnectionLimit != 64 {
		t.Fatalf("null-default keys from the environment: %+v", s)
	}
	// 0 is never for the timeouts, as distributed's `if self.idle_timeout` reads it.
	s = load(t, env("DASK_DISTRIBUTED__SCHEDULER__IDLE_TIMEOUT=0", "DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL=0",
		"DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=0", "DASK_DISTRIBUTED__SCHEDULER__ROOT_TASK_CO_ASSIGNMENT_DEPTH=0"))
	if s.IdleTimeout != scheduler.Never || s.Engine.WorkerTTL != scheduler.Never ||
		s.Engine.AllowedFailures != scheduler.Off || s.Engine.CoFamilyDepth != scheduler.Off {
		t.Fatalf("zeros that turn things off: %+v", s)
	}
	s = load(t, env("DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION=1.0", "DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL=300s"))
	if s.Engine.WorkerSaturation != 1.0 || s.Engine.WorkerTTL != 5*time.Minute {
		t.Fatalf("settings %+v", s)
	}
}

func TestInvalidSettings(t *testing.T) {
	cases := []struct {
		env  []string
		want []string
	}{
		{[]string{"DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION=abc"},
			[]string{`distributed.scheduler.worker-saturation: "abc" is not a number > 0 or "inf"`}},
		{[]string{"DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION=0"},
			[]string{`distributed.scheduler.worker-saturation: 0 is not a number > 0 or "inf"`}},
		{[]string{"DASK_DISTRIBUTED__COMM__COMPRESSION=zstd"},
			[]string{`distributed.comm.compression: "zstd" is not one of false, null, "auto", "lz4"`}},
		{[]string{"DASK_DISTRIBUTED__SCHEDULER__WORKER_TTL=5 parsecs", "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES=1.5"},
			[]string{`distributed.scheduler.worker-ttl: "5 parsecs" is not a duration`,
				`distributed.scheduler.allowed-failures: 1.5 is not an integer`}},
		{[]string{"DASK_DISTRIBUTED__ADMIN__LOW_LEVEL_LOG_LENGTH=0"},
			[]string{`distributed.admin.low-level-log-length: 0 is not an integer >= 1`}},
		{[]string{"DASK_DISTRIBUTED__SCHEDULER__BANDWIDTH=-1"},
			[]string{`distributed.scheduler.bandwidth: -1 is not a byte size > 0`}},
		{[]string{"DASK_DISTRIBUTED__SCHEDULER__BANDWIDTH=fast"},
			[]string{`distributed.scheduler.bandwidth: "fast" is not a byte size`}},
		{[]string{"DASK_DISTRIBUTED__SCHEDULER__WORK_STEALING=maybe"},
			[]string{`distributed.scheduler.work-stealing: "maybe" is not true or false`}},
		{[]string{`DASK_DISTRIBUTED__SCHEDULER__ACTIVE_MEMORY_MANAGER__POLICIES=[{"class": "distributed.active_memory_manager.RetireWorker"}]`},
			[]string{`distributed.scheduler.active-memory-manager.policies[0].class: "distributed.active_memory_manager.RetireWorker" is not distributed.active_memory_manager.ReduceReplicas (the only active memory manager policy this scheduler implements)`}},
		{[]string{"DASK_DISTRIBUTED__SCHEDULER__ACTIVE_MEMORY_MANAGER__POLICIES=ReduceReplicas"},
			[]string{`distributed.scheduler.active-memory-manager.policies: "ReduceReplicas" is not a list of policies`}},
		{[]string{"DASK_DISTRIBUTED__SCHEDULER__ROOTISH_TASKGROUP=-2"},
			[]string{`distributed.scheduler.rootish-taskgroup: -2 is not an integer >= 0`}},
	}
	for _, tc := range cases {
		_, err := LoadSchedulerSettings(ConfigSources{Paths: []string{}, Env: tc.env})
		if err == nil {
			t.Errorf("%v: accepted", tc.env)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%v: error %q lacks %q", tc.env, err, w)
			}
		}
	}
}

func TestMalformedConfigFiles(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		"bad.yaml":  "distributed: [unclosed\n",
		"list.yaml": "- a\n- b\n",
	} {
		p := writeFile(t, filepath.Join(dir, name), text)
		_, err := LoadSchedulerSettings(ConfigSources{Paths: []string{p}, Env: []string{}})
		if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "malformed") {
			t.Errorf("%s: %v", name, err)
		}
	}
	_, err := LoadSchedulerSettings(ConfigSources{Paths: []string{}, Env: []string{}, File: filepath.Join(dir, "missing.yaml")})
	if err == nil || !strings.Contains(err.Error(), "missing.yaml") {
		t.Errorf("missing --config file: %v", err)
	}
	// An empty file and a missing search path are fine, as in dask.
	empty := writeFile(t, filepath.Join(dir, "empty.yaml"), "")
	load(t, ConfigSources{Paths: []string{empty, filepath.Join(dir, "nope")}, Env: []string{}})
}

func TestParseTimedeltaAndBytes(t *testing.T) {
	for in, want := range map[any]time.Duration{
		"5 minutes": 5 * time.Minute, "300s": 300 * time.Second, "500ms": 500 * time.Millisecond,
		"1us": time.Microsecond, "h": time.Hour, "1.5 Hours": 90 * time.Minute, 3: 3 * time.Second,
		int64(2): 2 * time.Second, 0.25: 250 * time.Millisecond, "2 days": 48 * time.Hour, "1W": 7 * 24 * time.Hour,
	} {
		got, err := ParseTimedelta(in)
		if err != nil || got != want {
			t.Errorf("ParseTimedelta(%#v) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []any{"5 parsecs", "", "abc1", nil, true, "1e400s"} {
		if d, err := ParseTimedelta(in); err == nil {
			t.Errorf("ParseTimedelta(%#v) = %v, want an error", in, d)
		}
	}
	for in, want := range map[any]int64{
		"100 MB": 100_000_000, "1kiB": 1024, "64MiB": 64 << 20, "MB": 1_000_000, "5": 5, "2.5 kB": 2500,
		"1 Ki": 1024, "3g": 3_000_000_000, 123: 123,
	} {
		got, err := parseBytes(in)
		if err != nil || got != want {
			t.Errorf("parseBytes(%#v) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []any{"5 foos", "x", nil, "1e30 PB"} {
		if n, err := parseBytes(in); err == nil {
			t.Errorf("parseBytes(%#v) = %v, want an error", in, n)
		}
	}
}

// Files go through viper; dask's null (a value, not an absence) survives it.
func TestViperFilesKeepDaskSemantics(t *testing.T) {
	dir := t.TempDir()
	yml := writeFile(t, filepath.Join(dir, "a.yaml"), `
distributed:
  scheduler:
    worker_ttl: null
    worker-saturation: .inf
    root_task_co_assignment: yes
`)
	js := writeFile(t, filepath.Join(dir, "b.json"), `{"distributed": {"scheduler": {"allowed-failures": 7}}}`)
	s := load(t, ConfigSources{Paths: []string{yml, js}, Env: []string{}})
	if s.Engine.WorkerTTL != scheduler.Never || !math.IsInf(s.Engine.WorkerSaturation, 1) || !s.Engine.RootTaskCoAssignment || s.Engine.AllowedFailures != 7 {
		t.Fatalf("got %+v", s)
	}
	// --config is above the search paths, the environment above both
	file := writeFile(t, filepath.Join(dir, "cli.yaml"), "distributed: {scheduler: {worker-saturation: 1.0}}\n")
	s = load(t, ConfigSources{Paths: []string{yml}, File: file, Env: []string{}})
	if s.Engine.WorkerSaturation != 1.0 || !s.Engine.RootTaskCoAssignment {
		t.Fatalf("--config: got %+v", s)
	}
	s = load(t, ConfigSources{Paths: []string{yml}, File: file, Env: []string{"DASK_DISTRIBUTED__SCHEDULER__WORKER_SATURATION=2.5"}})
	if s.Engine.WorkerSaturation != 2.5 {
		t.Fatalf("env over --config: got %v", s.Engine.WorkerSaturation)
	}
}

func TestBadWithholdingValuesNameKeyAndChoices(t *testing.T) {
	dir := t.TempDir()
	for text, want := range map[string]string{
		"distributed: {scheduler: {worker-saturation: -1}}":              `distributed.scheduler.worker-saturation: -1 is not a number > 0 or "inf"`,
		"distributed: {scheduler: {worker-saturation: lots}}":            `distributed.scheduler.worker-saturation: "lots" is not a number > 0 or "inf"`,
		"distributed: {scheduler: {root-task-co-assignment: sometimes}}": `distributed.scheduler.root-task-co-assignment: "sometimes" is not true or false`,
		"distributed: {scheduler: {root-task-co-assignment: 2}}":         `distributed.scheduler.root-task-co-assignment: 2 is not true or false`,
		"distributed: {scheduler: {task-ordering: rust}}":                `distributed.scheduler.task-ordering: "rust" is not one of go, python`,
	} {
		p := writeFile(t, filepath.Join(dir, "bad.yaml"), text)
		_, err := LoadSchedulerSettings(ConfigSources{Paths: []string{}, File: p, Env: []string{}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: got %v, want %q", text, err, want)
		}
	}
}

// TestEmptyAMMPolicyListTurnsTheAMMOff: with no policy distributed's AMM
// runs and changes nothing; ours then does not run at all.
func TestEmptyAMMPolicyListTurnsTheAMMOff(t *testing.T) {
	env := func(kv ...string) ConfigSources { return ConfigSources{Paths: []string{}, Env: kv} }
	if s := load(t, env()); s.Engine.NoActiveMemoryManager {
		t.Fatal("AMM off by default")
	}
	if s := load(t, env("DASK_DISTRIBUTED__SCHEDULER__ACTIVE_MEMORY_MANAGER__POLICIES=[]")); !s.Engine.NoActiveMemoryManager {
		t.Fatal("AMM on with an empty policy list")
	}
}

// A tcp timeout under 11 s works here but makes every stock dask process
// reading the same configuration fail its connections: the scheduler says
// so at start, naming the key; the default says nothing.
func TestWarningsNameATCPTimeoutStockProcessesRefuse(t *testing.T) {
	env := func(kv ...string) ConfigSources { return ConfigSources{Paths: []string{}, Env: kv} }
	warnings := func(src ConfigSources) []string { s := load(t, src); return s.Warnings() }
	if w := warnings(env()); len(w) != 0 {
		t.Fatalf("defaults warn: %q", w)
	}
	if w := warnings(env("DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP=11s")); len(w) != 0 {
		t.Fatalf("11 s, the least distributed accepts, warns: %q", w)
	}
	for value, ours := range map[string]string{"5s": "at 5s", "0": "its default, 30s"} {
		w := warnings(env("DASK_DISTRIBUTED__COMM__TIMEOUTS__TCP=" + value))
		if len(w) != 1 || !strings.Contains(w[0], "distributed.comm.timeouts.tcp") || !strings.Contains(w[0], ours) {
			t.Errorf("tcp timeout %s: warnings %q, want one naming the key and %q", value, w, ours)
		}
	}
}
