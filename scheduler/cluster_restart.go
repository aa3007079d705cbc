package scheduler

import "daskgo/protocol"

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
	if s.hookMask != 0 {
		s.hook(HookEvent{Hook: HookRestart})
	}
}
