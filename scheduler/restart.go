package scheduler

import "daskgo/protocol"

// Restart is the first half of Scheduler.restart: every client releases
// everything it wants, so every task is forgotten through the ordinary
// transitions (free-keys reach the workers), and every client is told
// {"op": "restart"} so it cancels its futures. The outer ring then restarts
// the workers (nanny kill) and waits for them to come back.
type Restart struct {
	Base
}

func (s *State) handleRestart() {
	for _, cs := range s.clientOrder.Items() {
		keys := make([]protocol.Key, 0, cs.wantsWhat.Len())
		for _, ts := range cs.wantsWhat.Items() {
			keys = append(keys, ts.Key)
		}
		s.clientReleasesKeysRecs(keys, cs)
	}
	s.runTransitions()
	s.queueSlotsMaybeOpened()
	s.resetShuffles()
	s.stealRestart()
	for _, cs := range s.clientOrder.Items() {
		if cs.connected {
			s.toClientID(cs.ID, protocol.NewMap("op", "restart"))
		}
	}
}
