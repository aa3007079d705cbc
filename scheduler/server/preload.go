package server

import (
	"context"
	"fmt"
	"strings"
	"time"

	"daskgo/protocol"
)

// preloadTimeout bounds the host's start plus the preloads' imports and
// dask_setup calls.
const preloadTimeout = 5 * time.Minute

// runPreloads starts the host and runs the configured preloads in it
// (compat/host_plugins.py, distributed.preloading): Scheduler.__init__'s
// process_preloads and the end of Scheduler.start's preloads.start(). The
// scheduler listens already, as distributed's does by then. A module that
// cannot be imported, or whose click command rejects the arguments, fails
// the start with the host's error; a dask_setup that raises is logged by
// the host and the scheduler runs on, as in distributed.
func (s *Server) runPreloads(ctx context.Context) error {
	names := s.cfg.Preload
	if len(names) == 0 {
		if len(s.cfg.PreloadArgv) > 0 {
			return fmt.Errorf("preload arguments %s given without a --preload", strings.Join(s.cfg.PreloadArgv, " "))
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, preloadTimeout)
	defer cancel()
	argv := make([]any, len(s.cfg.PreloadArgv))
	for i, a := range s.cfg.PreloadArgv {
		argv[i] = a
	}
	mods := make([]any, len(names))
	for i, n := range names {
		mods[i] = n
	}
	ans, err := s.host.Call(ctx, "preload", protocol.NewMap("names", mods, "argv", argv))
	if err != nil {
		return fmt.Errorf("preload %s: %w", strings.Join(names, ", "), err)
	}
	if ans.Get("status") != "OK" {
		text, _ := ans.Get("exception_text").(string)
		return fmt.Errorf("preload %s: %s", strings.Join(names, ", "), text)
	}
	s.applyPluginState(ctx, asMap(ans.Get("result")), true)
	s.log.Info().Strs("preload", names).Msg("preloads run in the scheduler's Python host")
	return nil
}
