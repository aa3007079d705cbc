package main

import (
	"fmt"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"syscall"

	"github.com/rs/zerolog"
)

// heapProfiles writes a heap profile to path.1, path.2, ... (and the
// goroutines' stacks beside it, path.N.goroutines: what holds a goroutine
// that should have exited) on every
// SIGUSR1 (a benchmark sends one at the moment it wants to see, e.g. when a
// graph is in), and to path when the returned stop runs at exit. Each
// profile follows a forced GC, so in-use figures are live memory.
func heapProfiles(path string, log zerolog.Logger) (stop func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGUSR1)
	done := make(chan struct{})
	exited := make(chan struct{})
	go func() { // owned by run(); exits when stop closes done
		defer close(exited)
		n := 0
		for {
			select {
			case <-sig:
				n++
				writeHeapProfile(fmt.Sprintf("%s.%d", path, n), log)
				writeGoroutines(fmt.Sprintf("%s.%d.goroutines", path, n), log)
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sig)
		close(done)
		<-exited
		writeHeapProfile(path, log)
	}
}

func writeHeapProfile(path string, log zerolog.Logger) {
	runtime.GC()
	f, err := os.Create(path)
	if err != nil {
		log.Error().Err(err).Msg("--heap-profile")
		return
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		log.Error().Err(err).Msg("--heap-profile")
		return
	}
	log.Info().Str("path", path).Msg("heap profile written")
}

func writeGoroutines(path string, log zerolog.Logger) {
	f, err := os.Create(path)
	if err != nil {
		log.Error().Err(err).Msg("--heap-profile goroutines")
		return
	}
	defer f.Close()
	if err := pprof.Lookup("goroutine").WriteTo(f, 1); err != nil {
		log.Error().Err(err).Msg("--heap-profile goroutines")
	}
}
