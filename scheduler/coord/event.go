package coord

import "slices"

// Events: distributed/event.py EventExtension. An event exists while it is
// set or has waiters; a cleared event without waiters is forgotten, which
// is what keeps EventExtension from leaking names.

// EventWait is event_wait; the answer is true once set, false on timeout.
type EventWait struct {
	Call
	Name string
	// NoWait: timeout 0, answer at once.
	NoWait bool
}

// EventSet is event_set.
type EventSet struct {
	Call
	Name string
}

// EventClear is event_clear.
type EventClear struct {
	Call
	Name string
}

// EventIsSet is event_is_set.
type EventIsSet struct {
	Call
	Name string
}

type event struct {
	set     bool
	waiters []int64
}

func (c *Coordinator) dispatchEvent(op Op) bool {
	switch x := op.(type) {
	case *EventWait:
		c.eventWait(x)
	case *EventSet:
		c.eventSet(x.Name)
	case *EventClear:
		c.eventClear(x.Name)
	case *EventIsSet:
		c.host.Reply(x.ReplyTo, c.EventIsSet(x.Name))
	default:
		return false
	}
	return true
}

// EventIsSet mirrors EventExtension.event_is_set.
func (c *Coordinator) EventIsSet(name string) bool {
	ev := c.events[name]
	return ev != nil && ev.set
}

func (c *Coordinator) event(name string) *event {
	if c.events == nil {
		c.events = map[string]*event{}
	}
	ev := c.events[name]
	if ev == nil {
		ev = &event{}
		c.events[name] = ev
	}
	return ev
}

// eventWait mirrors EventExtension.event_wait.
func (c *Coordinator) eventWait(x *EventWait) {
	ev := c.event(x.Name)
	if ev.set {
		c.host.Reply(x.ReplyTo, true)
		return
	}
	if x.NoWait || x.ReplyTo == 0 {
		c.forgetIdleEvent(x.Name, ev)
		c.host.Reply(x.ReplyTo, false)
		return
	}
	id := x.ReplyTo
	ev.waiters = append(ev.waiters, id)
	c.park(id, func(why WaitEnd) {
		ev.waiters = slices.DeleteFunc(ev.waiters, func(w int64) bool { return w == id })
		c.forgetIdleEvent(x.Name, ev)
		c.timeoutAnswer(id, why, false)
	})
}

// eventSet mirrors EventExtension.event_set: every waiter wakes.
func (c *Coordinator) eventSet(name string) {
	ev := c.event(name)
	ev.set = true
	for _, id := range ev.waiters {
		c.answer(id, true)
	}
	ev.waiters = nil
}

// eventClear mirrors EventExtension.event_clear.
func (c *Coordinator) eventClear(name string) {
	if ev := c.events[name]; ev != nil {
		ev.set = false
		c.forgetIdleEvent(name, ev)
	}
}

// forgetIdleEvent is EventExtension._delete_event once nobody needs it.
func (c *Coordinator) forgetIdleEvent(name string, ev *event) {
	if !ev.set && len(ev.waiters) == 0 && c.events[name] == ev {
		delete(c.events, name)
	}
}

// NEvents counts the events the engine remembers (set, or waited on).
func (c *Coordinator) NEvents() int { return len(c.events) }
