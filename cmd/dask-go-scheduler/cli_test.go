package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// TestArgumentListsOfDeploymentTools: the argument lists that the Helm
// chart, KubeCluster and ECS pass to `dask-scheduler` parse, with click's
// "--port=8786" and "--port 8786" forms alike.
func TestArgumentListsOfDeploymentTools(t *testing.T) {
	cases := []struct {
		args       []string
		listen     string
		dashboard  string
		idle       time.Duration
		noDashPage bool
	}{
		{[]string{"--host", "0.0.0.0"}, "tcp://0.0.0.0:8786", ":8787", 0, false},
		{[]string{"--port=8786", "--dashboard-address=:8787"}, "tcp://:8786", ":8787", 0, false},
		{[]string{"scheduler", "--port", "9000", "--dashboard-address", "8788", "--idle-timeout", "5 minutes"}, "tcp://:9000", ":8788", 5 * time.Minute, false},
		{[]string{"--host", "tcp://10.0.0.1:7000", "--no-dashboard", "--no-show", "--use-xheaders", "False"}, "tcp://10.0.0.1:7000", ":8787", 0, true},
		{[]string{"--host", "10.0.0.1:7000", "--port", "7001", "--idle-timeout=600"}, "tcp://10.0.0.1:7001", ":8787", 10 * time.Minute, false},
		{[]string{"--protocol", "tcp", "--dashboard-address", "http://127.0.0.1:0"}, "tcp://:8786", "127.0.0.1:0", 0, false},
	}
	for _, c := range cases {
		o, err := parseArgs(c.args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		if err := o.unsupported(); err != nil {
			t.Fatalf("%v: %v", c.args, err)
		}
		listen, err := o.listenAddress("tcp", false)
		if err != nil || listen != c.listen {
			t.Errorf("%v: listen %q, %v; want %q", c.args, listen, err, c.listen)
		}
		dash, err := o.dashboardListen()
		if err != nil || dash != c.dashboard {
			t.Errorf("%v: dashboard %q, %v; want %q", c.args, dash, err, c.dashboard)
		}
		idle, err := o.idleTimeoutOr(0)
		if err != nil || idle != c.idle {
			t.Errorf("%v: idle timeout %v, %v; want %v", c.args, idle, err, c.idle)
		}
		if o.dashboard == c.noDashPage {
			t.Errorf("%v: dashboard pages %v", c.args, o.dashboard)
		}
	}
}

// TestUnsupportedFlagsFailNamingThem: what `dask scheduler` can do and this
// scheduler cannot stops the start with a message naming the flag.
func TestUnsupportedFlagsFailNamingThem(t *testing.T) {
	cases := map[string][]string{
		"--jupyter":    {"--jupyter"},
		"--protocol":   {"--protocol", "ucx"},
		"--host ws://": {"--host", "ws://0.0.0.0"},
	}
	for name, args := range cases {
		o, err := parseArgs(args, io.Discard)
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		err = o.unsupported()
		if err == nil || !strings.Contains(err.Error(), strings.Fields(name)[0]) {
			t.Errorf("%v: error %v, want one naming %s", args, err, name)
		}
	}
}

// TestPreloadArgv: with --preload, what this command does not know goes
// to the preload's click command in order (dask scheduler's PRELOAD_ARGV),
// and the options it knows keep their values, wherever they stand.
func TestPreloadArgv(t *testing.T) {
	gateway := []string{"--preload", "dask_gateway.scheduler_preload", "--dg-api-address", "127.0.0.1:0",
		"--port", "0", "--dg-heartbeat-period=5", "--no-dashboard", "-x", "pos", "--", "--port", "9"}
	o, err := parseArgs(gateway, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(o.preloadArgv, " "), "--dg-api-address 127.0.0.1:0 --dg-heartbeat-period=5 -x pos --port 9"; got != want {
		t.Errorf("preload argv %q, want %q", got, want)
	}
	if o.port != "0" || o.dashboard || len(o.preload) != 1 {
		t.Errorf("known options lost: port %q dashboard %v preload %v", o.port, o.dashboard, o.preload)
	}
	if err := o.unsupported(); err != nil {
		t.Errorf("--preload refused: %v", err)
	}
}

// TestBadArgumentsAreErrors: unknown flags, extra arguments, bad ports and
// addresses are errors, never a scheduler on some other address.
func TestBadArgumentsAreErrors(t *testing.T) {
	if _, err := parseArgs([]string{"--bogus"}, io.Discard); err == nil {
		t.Error("--bogus accepted")
	}
	if _, err := parseArgs([]string{"--dg-api-address", "x"}, io.Discard); err == nil {
		t.Error("dask-gateway's --dg-* accepted")
	}
	if _, err := parseArgs([]string{"extra"}, io.Discard); err == nil || !strings.Contains(err.Error(), "extra") {
		t.Errorf("extra argument: %v", err)
	}
	if _, err := parseArgs([]string{"-h"}, io.Discard); !errors.Is(err, pflag.ErrHelp) {
		t.Errorf("-h: %v", err)
	}
	for _, args := range [][]string{{"--port", "http"}, {"--port", "70000"}, {"--port", "8786,8787"}, {"--host", "a", "--interface", "lo"}} {
		o, err := parseArgs(args, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		if l, err := o.listenAddress("tcp", false); err == nil {
			t.Errorf("%v: listens on %s", args, l)
		}
	}
	for _, a := range []string{"nonsense", ":99999", "host:port"} {
		o, _ := parseArgs([]string{"--dashboard-address", a}, io.Discard)
		if d, err := o.dashboardListen(); err == nil || !strings.Contains(err.Error(), "--dashboard-address") {
			t.Errorf("--dashboard-address %s: %q, %v", a, d, err)
		}
	}
	o, _ := parseArgs([]string{"--idle-timeout", "soon"}, io.Discard)
	if _, err := o.idleTimeoutOr(0); err == nil {
		t.Error("--idle-timeout soon accepted")
	}
}

// TestInterfaceResolvesToItsAddress: --interface lo listens on loopback.
func TestInterfaceResolvesToItsAddress(t *testing.T) {
	o, _ := parseArgs([]string{"--interface", "lo", "--port", "0"}, io.Discard)
	l, err := o.listenAddress("tcp", false)
	if err != nil || l != "tcp://127.0.0.1:0" {
		t.Fatalf("--interface lo: %q, %v", l, err)
	}
	o, _ = parseArgs([]string{"--interface", "no-such-if0"}, io.Discard)
	if _, err := o.listenAddress("tcp", false); err == nil {
		t.Fatal("unknown interface accepted")
	}
}
