package scheduler

import (
	"fmt"

	"daskgo/scheduler/coord"
)

// The active memory manager's controls (ActiveMemoryManagerExtension.
// amm_handler, behind Client.amm): start and stop the periodic run, ask
// whether it runs, run it once now. The engine's manager runs one policy,
// ReduceReplicas (amm.go); compat refuses a configuration naming another.
// The outer ring sends AMMTick every interval whenever the policy is
// configured; the ticks run it only while it is started, as distributed's
// PeriodicCallback exists only while it is.

// ammOn reports whether AMMTick runs the policy.
func (s *State) ammOn() bool { return s.ammRunning && !s.cfg.NoAMMPolicy }

// AMMRunning is ActiveMemoryManagerExtension.running.
func (s *State) AMMRunning() bool { return s.ammRunning }

func (s *State) handleAMMControl(x *AMMControl) {
	switch x.Method {
	case "start":
		s.ammRunning = true
	case "stop":
		s.ammRunning = false
	case "running":
		s.reply(x.ReplyTo, s.ammRunning)
	case "run_once":
		if !s.cfg.NoAMMPolicy {
			s.reduceReplicas()
		}
	default: // the edge checks it: amm_handler's assert
		s.reply(x.ReplyTo, &coord.RemoteException{Module: "builtins", Class: "AssertionError",
			Text: fmt.Sprintf("amm_handler method %q is not one of start, stop, run_once, running", x.Method)})
	}
}
