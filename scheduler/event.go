package scheduler

import "slices"

// Events: distributed/event.py EventExtension. An event exists while it is
// set or has waiters; a cleared event without waiters is forgotten, which
// is what keeps EventExtension from leaking names.

// EventWait is event_wait; the answer is true once set, false on timeout.
type EventWait struct {
	Base
	Call
	Name string
	// NoWait: timeout 0, answer at once.
	NoWait bool
}

// EventSet is event_set.
type EventSet struct {
	Base
	Call
	Name string
}

// EventClear is event_clear.
type EventClear struct {
	Base
	Call
	Name string
}

// EventIsSet is event_is_set.
type EventIsSet struct {
	Base
	Call
	Name string
}

type event struct {
	set     bool
	waiters []int64
}

func (s *State) dispatchEvent(st Stimulus) bool {
	switch x := st.(type) {
	case *EventWait:
		s.eventWait(x)
	case *EventSet:
		s.eventSet(x.Name)
	case *EventClear:
		s.eventClear(x.Name)
	case *EventIsSet:
		s.reply(x.ReplyTo, s.EventIsSet(x.Name))
	default:
		return false
	}
	return true
}

// EventIsSet mirrors EventExtension.event_is_set.
func (s *State) EventIsSet(name string) bool {
	ev := s.events[name]
	return ev != nil && ev.set
}

func (s *State) event(name string) *event {
	if s.events == nil {
		s.events = map[string]*event{}
	}
	ev := s.events[name]
	if ev == nil {
		ev = &event{}
		s.events[name] = ev
	}
	return ev
}

// eventWait mirrors EventExtension.event_wait.
func (s *State) eventWait(x *EventWait) {
	ev := s.event(x.Name)
	if ev.set {
		s.reply(x.ReplyTo, true)
		return
	}
	if x.NoWait || x.ReplyTo == 0 {
		s.forgetIdleEvent(x.Name, ev)
		s.reply(x.ReplyTo, false)
		return
	}
	id := x.ReplyTo
	ev.waiters = append(ev.waiters, id)
	s.park(id, func(why WaitEnd) {
		ev.waiters = slices.DeleteFunc(ev.waiters, func(w int64) bool { return w == id })
		s.forgetIdleEvent(x.Name, ev)
		s.timeoutAnswer(id, why, false)
	})
}

// eventSet mirrors EventExtension.event_set: every waiter wakes.
func (s *State) eventSet(name string) {
	ev := s.event(name)
	ev.set = true
	for _, id := range ev.waiters {
		s.answer(id, true)
	}
	ev.waiters = nil
}

// eventClear mirrors EventExtension.event_clear.
func (s *State) eventClear(name string) {
	if ev := s.events[name]; ev != nil {
		ev.set = false
		s.forgetIdleEvent(name, ev)
	}
}

// forgetIdleEvent is EventExtension._delete_event once nobody needs it.
func (s *State) forgetIdleEvent(name string, ev *event) {
	if !ev.set && len(ev.waiters) == 0 && s.events[name] == ev {
		delete(s.events, name)
	}
}

// NEvents counts the events the engine remembers (set, or waited on).
func (s *State) NEvents() int { return len(s.events) }
