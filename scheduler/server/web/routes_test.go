package web

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"daskgo/scheduler"
)

// fakeBackend stands in for the scheduler: a fixed snapshot and a record
// of the calls that would reach the engine.
type fakeBackend struct {
	mu      sync.Mutex
	snap    *scheduler.Snapshot
	retired [][]string
	toClose []string
}

func (f *fakeBackend) Snapshot() *scheduler.Snapshot {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap
}
func (f *fakeBackend) Identity(context.Context) (any, error) {
	return map[string]any{"type": "Scheduler", "id": "Scheduler-1"}, nil
}
func (f *fakeBackend) Counts(context.Context) (map[string]int64, error) {
	return map[string]int64{"tasks": 3}, nil
}
func (f *fakeBackend) AdaptiveTarget(context.Context) (int, error) { return 4, nil }
func (f *fakeBackend) Workers(context.Context) ([]NamedWorker, error) {
	return []NamedWorker{{Name: "w1", Address: "tcp://127.0.0.1:1"}}, nil
}
func (f *fakeBackend) WorkersToClose(_ context.Context, n int) ([]string, error) {
	return f.toClose[:n], nil
}
func (f *fakeBackend) RetireWorkers(_ context.Context, ws []string) (map[string]any, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.retired = append(f.retired, ws)
	out := map[string]any{}
	for _, w := range ws {
		out[w] = map[string]any{"address": w}
	}
	return out, nil
}
func (f *fakeBackend) CheckIdle(context.Context) (*float64, error) { v := 12.5; return &v, nil }
func (f *fakeBackend) Process() ProcessFacts {
	return ProcessFacts{Ticks: 7, HelperRSS: []int64{1 << 20}}
}

func startWeb(t *testing.T, cfg Config) (*Server, *fakeBackend, string) {
	t.Helper()
	b := &fakeBackend{snap: &scheduler.Snapshot{
		Workers:  []scheduler.WorkerView{{Address: "tcp://127.0.0.1:1", Name: "w1", Status: "running", NThreads: 2}},
		Clients:  1,
		Prefixes: []scheduler.PrefixView{{Name: "inc"}},
	}, toClose: []string{"tcp://127.0.0.1:1"}}
	cfg.Addr = "127.0.0.1:0"
	cfg.Backend = b
	cfg.Log = zerolog.Nop()
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
	})
	return s, b, fmt.Sprintf("http://127.0.0.1:%d", s.Port())
}

func get(t *testing.T, url string) (int, string, http.Header) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.Header
}

// TestDefaultRoutes: with distributed's default routes list, /health, the
// JSON routes, /metrics and the pages answer; /api/v1 and unknown paths
// are 404, as on a stock scheduler.
func TestDefaultRoutes(t *testing.T) {
	_, _, base := startWeb(t, Config{})
	code, body, h := get(t, base+"/health")
	if code != 200 || body != "ok" || !strings.HasPrefix(h.Get("Content-Type"), "text/plain") {
		t.Errorf("/health: %d %q %q", code, body, h.Get("Content-Type"))
	}
	for _, path := range []string{"/json/counts.json", "/json/identity.json", "/individual-plots.json", "/metrics",
		"/status", "/workers", "/tasks", "/dashboard/state.json", "/individual-task-stream"} {
		if code, body, _ := get(t, base+path); code != 200 || body == "" {
			t.Errorf("%s: %d", path, code)
		}
	}
	for _, path := range []string{"/api/v1", "/api/v1/check_idle", "/nope", "/json/nope.json"} {
		if code, _, _ := get(t, base+path); code != 404 {
			t.Errorf("%s: %d, want 404", path, code)
		}
	}
	resp, err := (&http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}).Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusFound || resp.Header.Get("Location") != "/status" {
		t.Errorf("/: %d -> %q", resp.StatusCode, resp.Header.Get("Location"))
	}
}

// TestRoutesFollowTheConfiguredList: the API is on when listed, a module
// left out is 404, an unknown module stops the start naming it.
func TestRoutesFollowTheConfiguredList(t *testing.T) {
	_, _, base := startWeb(t, Config{Routes: []string{"distributed.http.scheduler.api", "distributed.http.health"}})
	if code, body, _ := get(t, base+"/api/v1/adaptive_target"); code != 200 || strings.TrimSpace(body) != `{"workers":4}` {
		t.Errorf("adaptive_target: %d %s", code, body)
	}
	if code, body, _ := get(t, base+"/api/v1/check_idle"); code != 200 || strings.TrimSpace(body) != `{"idle_since":12.5}` {
		t.Errorf("check_idle: %d %s", code, body)
	}
	if code, body, _ := get(t, base+"/api/v1/get_workers"); code != 200 || !strings.Contains(body, `"num_workers":1`) {
		t.Errorf("get_workers: %d %s", code, body)
	}
	if code, _, _ := get(t, base+"/metrics"); code != 404 {
		t.Errorf("/metrics without the prometheus module: %d", code)
	}
	_, err := Start(Config{Addr: "127.0.0.1:0", Backend: &fakeBackend{}, Routes: []string{"mypkg.routes"}})
	if err == nil || !strings.Contains(err.Error(), "mypkg.routes") {
		t.Fatalf("unknown route module: %v", err)
	}
}

// TestRetireWorkersRejectsMalformedBodies: a body that is not a JSON
// object of n or workers is a 400 with a message, and no worker is
// retired; {"n": 1} retires the one workers_to_close names.
func TestRetireWorkersRejectsMalformedBodies(t *testing.T) {
	_, b, base := startWeb(t, Config{Routes: []string{"distributed.http.scheduler.api"}})
	post := func(body string) (int, string) {
		resp, err := http.Post(base+"/api/v1/retire_workers", "application/json", strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	for _, body := range []string{"", "{", "[1]", `{"n": "two"}`, `{"n": -1}`, `{"workers": 3}`, "\x00\xff garbage"} {
		if code, msg := post(body); code != 400 || !strings.Contains(msg, "retire_workers") {
			t.Errorf("body %q: %d %q", body, code, msg)
		}
	}
	if len(b.retired) != 0 {
		t.Fatalf("malformed bodies retired %v", b.retired)
	}
	code, out := post(`{"n": 1}`)
	if code != 200 || !strings.Contains(out, "tcp://127.0.0.1:1") || len(b.retired) != 1 {
		t.Fatalf("n=1: %d %s %v", code, out, b.retired)
	}
	if code, _, _ := get(t, base+"/api/v1/retire_workers"); code != http.StatusMethodNotAllowed {
		t.Errorf("GET retire_workers: %d", code)
	}
}

// TestPrefixAndNoPages: every route moves under --dashboard-prefix;
// --no-dashboard drops the pages and keeps /health and /metrics.
func TestPrefixAndNoPages(t *testing.T) {
	_, _, base := startWeb(t, Config{Prefix: "/dask/", NoPages: true})
	if code, _, _ := get(t, base+"/dask/health"); code != 200 {
		t.Errorf("/dask/health: %d", code)
	}
	if code, _, _ := get(t, base+"/dask/metrics"); code != 200 {
		t.Errorf("/dask/metrics: %d", code)
	}
	for _, path := range []string{"/health", "/dask/status", "/dask/dashboard/state.json"} {
		if code, _, _ := get(t, base+path); code != 404 {
			t.Errorf("%s: %d, want 404", path, code)
		}
	}
	_, _, base = startWeb(t, Config{Prefix: "dask"})
	code, body, _ := get(t, base+"/dask/status")
	// the pages fetch their data relative to themselves, so under the prefix
	if code != 200 || !strings.Contains(body, "<html") {
		t.Errorf("/dask/status: %d", code)
	}
}

// TestMetricsCarryDistributedNames: the scrape has distributed's metric
// names with their labels, our own, and the Go runtime's.
func TestMetricsCarryDistributedNames(t *testing.T) {
	_, _, base := startWeb(t, Config{})
	_, body, _ := get(t, base+"/metrics")
	for _, want := range []string{
		`dask_scheduler_clients 1`,
		`dask_scheduler_workers{state="idle"}`,
		`dask_scheduler_tasks{state="memory"}`,
		`dask_scheduler_prefix_state_totals_total{state="memory",task_prefix_name="inc"}`,
		`dask_scheduler_tick_count_total 7`,
		`dask_stealing_request_count_total{cost_multiplier="1.0"}`,
		`dask_scheduler_helper_rss_bytes 1.048576e+06`,
		`go_goroutines`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %s", want)
		}
	}
}

// TestSlowClientsCannotHoldTheServer: a connection that never finishes
// its request headers is closed by the read-header timeout, and an event
// stream ends when the server stops, leaving no goroutine behind.
func TestSlowClientsCannotHoldTheServer(t *testing.T) {
	before := runtime.NumGoroutine()
	s, _, base := startWeb(t, Config{})
	conn, err := net.Dial("tcp", strings.TrimPrefix(base, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("GET /health HTTP/1.1\r\nHost: x\r\n")) // never ends the headers
	_ = conn.SetReadDeadline(time.Now().Add(readHeaderTimeout + 5*time.Second))
	if _, err := io.ReadAll(conn); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			t.Fatal("a half-sent request held its connection past the read-header timeout")
		}
	}

	resp, err := http.Get(base + "/dashboard/events")
	if err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "data: ") {
		t.Fatalf("first event: %q %v", line, err)
	}
	var v View
	if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &v); err != nil || len(v.Workers) != 1 {
		t.Fatalf("event is not a view: %v %+v", err, v)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with an open event stream: %v", err)
	}
	resp.Body.Close()
	http.DefaultClient.CloseIdleConnections()
	deadline := time.Now().Add(2 * time.Second)
	for runtime.NumGoroutine() > before && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before {
		t.Errorf("%d goroutines after shutdown, %d before", n, before)
	}
}

// TestBusyPortFallsBackToAFreeOne: a dashboard port already taken does not
// stop the scheduler; the server takes a free port, as distributed's does.
func TestBusyPortFallsBackToAFreeOne(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().(*net.TCPAddr).Port
	s, err := Start(Config{Addr: busy.Addr().String(), Backend: &fakeBackend{}, Log: zerolog.Nop()})
	if err != nil {
		t.Fatalf("busy port: %v", err)
	}
	defer s.Shutdown(context.Background())
	if s.Port() == taken || s.Port() == 0 {
		t.Fatalf("bound %d with %d taken", s.Port(), taken)
	}
	if _, err := Start(Config{Addr: "256.1.1.1:0", Backend: &fakeBackend{}, Log: zerolog.Nop()}); err == nil {
		t.Fatal("an address that cannot be bound started")
	}
}
