package scheduler

// handleSetResources mirrors Scheduler.add_resources (set_resources, which
// Worker.set_resources calls after changing its own): the worker's
// resources are updated and the cluster's resource index follows.
//
// Two departures, both so that the books stay right: the resources in use
// are kept (add_resources resets used_resources to 0, which the tasks
// still running would then release below zero), and tasks waiting in
// no-worker that the new resources admit are scheduled now (distributed
// leaves them until another worker joins).
func (s *State) handleSetResources(x *SetResources) {
	ws := s.workers[x.Worker]
	if ws == nil {
		s.logf(LogWarn, "", x.Worker, "", "set_resources for unknown worker %s ignored", x.Worker)
		return
	}
	if ws.Resources == nil {
		ws.Resources = map[string]float64{}
	}
	for r, q := range x.Resources {
		ws.Resources[r] = q
		if s.resources[r] == nil {
			s.resources[r] = map[string]float64{}
		}
		s.resources[r][ws.Address] = q
	}
	s.reply(x.ReplyTo, "OK")
	if ws.status == "running" {
		s.workerBecameRunning(ws)
	}
}
