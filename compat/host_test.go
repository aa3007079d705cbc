package compat

import (
	"context"
	"errors"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"daskgo/compat/venv"
	"daskgo/protocol"
)

// testHostModule adds ops the tests drive: echo (answers its args and a
// call back to Go), sleep (holds only its caller) and crash.
const testHostModule = `
import asyncio, os
import host

@host.request("echo")
async def echo(msg):
    back = await host.acall_go("double", x=msg["x"])
    return {"x": msg["x"], "back": back}

@host.request("sleep")
async def sleep(msg):
    await asyncio.sleep(3600)

@host.request("crash")
async def crash(msg):
    os._exit(3)

handled = 0

@host.message("block")
def block(msg):
    import time
    time.sleep(1)

@host.message("count")
def count(msg):
    global handled
    handled += 1

@host.request("stats")
async def stats(msg):
    return {"handled": handled, "dropped": host._dropped_messages}
`

func startTestHost(t *testing.T) *Host {
	t.Helper()
	h := NewHost(HostConfig{Python: venv.Python(t), Log: testLogger(t),
		Modules: []pySource{{"host_test_ops", testHostModule}}})
	h.Serve("double", func(ctx context.Context, args *protocol.Map) (any, error) {
		x, _ := args.Get("x").(int64)
		return 2 * x, nil
	})
	t.Cleanup(h.Close)
	return h
}

func TestHostStartsLazilyAndRoundTrips(t *testing.T) {
	h := startTestHost(t)
	if h.PID() != 0 {
		t.Fatalf("host started before any request: pid %d", h.PID())
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ans, err := h.Call(ctx, "echo", protocol.NewMap("x", int64(21)))
	if err != nil {
		t.Fatal(err)
	}
	if ans.Get("status") != "OK" || ans.Get("x") != int64(21) || ans.Get("back") != int64(42) {
		t.Fatalf("answer %s", protocol.String(ans))
	}
	ans, err = h.Call(ctx, "no-such-op", nil)
	if err != nil {
		t.Fatal(err)
	}
	if ans.Get("status") != "error" || !strings.Contains(protocol.String(ans.Get("exception_text")), "no-such-op") {
		t.Fatalf("unknown op answered %s", protocol.String(ans))
	}
}

func TestHostCrashFailsInflightAndRestarts(t *testing.T) {
	h := startTestHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var exits []string
	var mu sync.Mutex
	h.OnExit(func(pid int, status string) { mu.Lock(); exits = append(exits, status); mu.Unlock() })
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	first := h.PID()
	errs := make(chan error, 2)
	for range 2 {
		go func() { _, err := h.Call(ctx, "sleep", nil); errs <- err }()
	}
	for h.Inflight() < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(first, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		err := <-errs
		var gone *errProcGone
		if !errors.As(err, &gone) || !strings.Contains(err.Error(), "signal: killed") {
			t.Fatalf("in-flight call failed with %v, want the exit status", err)
		}
	}
	ans, err := h.Call(ctx, "echo", protocol.NewMap("x", int64(1)))
	if err != nil || ans.Get("back") != int64(2) {
		t.Fatalf("after the crash: %v %v", err, ans)
	}
	if h.PID() == first || h.PID() == 0 {
		t.Fatalf("no new host: pid %d", h.PID())
	}
	_, err = h.Call(ctx, "crash", nil)
	if err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("crash answered %v, want exit status 3", err)
	}
	// the hook runs after the calls in flight have failed
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(exits)
		mu.Unlock()
		if n == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("exit hook ran %d times: %v", n, exits)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHostMessagesAreBounded: one-way messages to a host whose loop is
// stuck are queued up to a bound, then dropped and counted, on either
// side; none is lost without being counted, and the host answers after.
func TestHostMessagesAreBounded(t *testing.T) {
	h := startTestHost(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	h.Post("block", nil)
	const n = 25000
	refused := 0
	for range n {
		if !h.Post("count", nil) {
			refused++
		}
	}
	var ans *protocol.Map
	deadline := time.Now().Add(30 * time.Second)
	for {
		var err error
		if ans, err = h.Call(ctx, "stats", nil); err != nil {
			t.Fatal(err)
		}
		handled, _ := ans.Get("handled").(int64)
		dropped, _ := ans.Get("dropped").(int64)
		if int(handled+dropped)+refused == n {
			if handled > 10000+maxPosts || dropped+int64(refused) == 0 {
				t.Fatalf("handled %d, dropped %d in the host and %d in Go: no bound", handled, dropped, refused)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("handled %d + dropped %d + refused %d != %d", handled, dropped, refused, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
