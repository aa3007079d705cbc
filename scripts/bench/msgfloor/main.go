// Command msgfloor measures the floor of the machine for the scheduler's
// per-message work: the CPU a minimal Go program spends to read the
// messages a real run's scheduler read and write the messages it wrote, on
// as many TCP connections, with the same sizes and the same pacing, and
// nothing else: what the scheduler's per-message cost is measured against.
//
// The traffic is a Script (script.go) that scripts/bench/msgfloor.py cuts
// out of the scheduler's --log-level trace log of a recorded run (the
// graph-path benchmark's map-20k: 2 stock workers, a stock Client). Two
// processes replay it:
//
//	msgfloor drive (the peers) ── each read message, at its recorded time ──▶ msgfloor serve
//	                            ◀── the messages written after it, at once ──┘ (the floor, measured)
//
// The floor (serve.go) is what the scheduler cannot do with less: a read
// call per wake-up, a write call per message written, on the same kind of
// sockets, GOMAXPROCS 1 as dask-go-scheduler runs; no decoding, no engine,
// no goroutine hand-off, no timer. Its CPU per message (and per task of the
// recorded run) is the floor that our own figure is compared with.
//
// Usage (msgfloor.py runs both):
//
//	msgfloor serve --script S.json.gz [--batch 50ms]   # prints its address, then one JSON report line at the end
//	msgfloor drive --script S.json.gz --addr HOST:PORT [--speed X]   # prints one JSON report line
//
// serve --batch W is the floor of another design: one goroutine polls every
// connection each W (batch_linux.go), a wake-up per W instead of one per
// message (heartbeat_floor.py measures it on idle heartbeats).
//
// The floor's CPU window opens at its first message and closes when the
// last connection has ended (the driver closes them after the last reply).
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: msgfloor serve|drive --script FILE [--addr HOST:PORT]")
		os.Exit(2)
	}
	fs := flag.NewFlagSet(os.Args[1], flag.ExitOnError)
	script := fs.String("script", "", "the recorded traffic (JSON, .gz allowed)")
	addr := fs.String("addr", "127.0.0.1:0", "serve: listen here; drive: the floor's address")
	drain := fs.Duration("drain-timeout", 10*time.Second, "drive: how long to wait for the last replies")
	speed := fs.Float64("speed", 1, "drive: replay this many times faster than recorded")
	batch := fs.Duration("batch", 0, "serve: poll every connection from one goroutine every this long (serveBatched) instead of a goroutine per connection")
	_ = fs.Parse(os.Args[2:])
	var err error
	switch os.Args[1] {
	case "serve":
		err = runServe(*script, *addr, *batch)
	case "drive":
		err = runDrive(*script, *addr, *speed, *drain)
	default:
		err = fmt.Errorf("unknown mode %q (serve or drive)", os.Args[1])
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "msgfloor %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// ServeReport is the floor's JSON line.
type ServeReport struct {
	MessagesIn  int64 `json:"messages_in"`
	MessagesOut int64 `json:"messages_out"`
	Reads       int64 `json:"reads"`
	FailedOut   int64 `json:"failed_writes"`
	Usage
	GOMAXPROCS int `json:"gomaxprocs"`
}

func runServe(scriptPath, addr string, batch time.Duration) error {
	s, err := loadScript(scriptPath)
	if err != nil {
		return err
	}
	// dask-go-scheduler's runtimeDefaults (cmd/dask-go-scheduler/runtime.go)
	if os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
	f := newFloor(s)
	f.batch = batch
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	defer lis.Close()
	runtime.GC() // the script's garbage out of the window
	if _, err := fmt.Println(lis.Addr().String()); err != nil {
		return err
	}
	serr := f.serve(lis)
	rep := ServeReport{MessagesIn: f.in.Load(), MessagesOut: f.writes.Load(), Reads: f.reads.Load(),
		FailedOut: f.failed.Load(), Usage: f.meter.usage(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return fmt.Errorf("print report: %w", err)
	}
	return serr
}

func runDrive(scriptPath, addr string, speed float64, drainTimeout time.Duration) error {
	s, err := loadScript(scriptPath)
	if err != nil {
		return err
	}
	rep, derr := drive(s, addr, speed, drainTimeout)
	if err := json.NewEncoder(os.Stdout).Encode(rep); err != nil {
		return fmt.Errorf("print report: %w", err)
	}
	return derr
}
