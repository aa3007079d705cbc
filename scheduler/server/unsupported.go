package server

import (
	"daskgo/compat/pickle"
	"daskgo/scheduler"
)

// rejectUnsupportedGraph turns a graph that needs a feature the Go
// scheduler lacks into a materialization error, so every key of the
// submission errs at once with a message naming the feature and the way
// around it, instead of tasks failing one by one on the workers.
func rejectUnsupportedGraph(gm *scheduler.GraphMaterialized) {
	if gm.Err != nil {
		return
	}
	for _, t := range gm.Tasks {
		if t.Kind == "P2PBarrierTask" {
			msg := p2pMessage + " is not supported by dask-go-scheduler yet (task " + t.Key.String() + ")"
			gm.Tasks = nil
			gm.Err = &scheduler.ErrorInfo{
				Exception:     pickle.Exception("builtins", "NotImplementedError", msg),
				ExceptionText: "NotImplementedError(" + msg + ")",
			}
			return
		}
	}
}
