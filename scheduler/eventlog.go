package scheduler

import (
	"sort"

	"daskgo/protocol"
)

// The event log: distributed.broker.Broker, behind Scheduler.log_event,
// subscribe_topic, unsubscribe_topic and get_events. Each topic keeps a
// bounded deque of (time, msg) events (distributed.admin.
// low-level-log-length) and a set of subscribed clients, which receive
// {"op": "event", "topic", "event"} on their stream as events arrive.
// Messages are opaque: msgpack-able values relayed as decoded.

// Event is one logged event: (time, msg) on the wire.
type Event struct {
	Time float64
	Msg  any
}

type topic struct {
	events      []Event // a ring of at most broker.maxlen, oldest at head
	head        int
	subscribers map[string]bool
}

type broker struct {
	maxlen int
	topics map[string]*topic
}

func newBroker(maxlen int) broker { return broker{maxlen: maxlen, topics: map[string]*topic{}} }

// topic is Broker._topics[name]: a defaultdict, so reading creates.
func (b *broker) topic(name string) *topic {
	t := b.topics[name]
	if t == nil {
		t = &topic{subscribers: map[string]bool{}}
		b.topics[name] = t
	}
	return t
}

func (t *topic) publish(e Event, maxlen int) {
	if len(t.events) < maxlen {
		t.events = append(t.events, e)
		return
	}
	t.events[t.head] = e
	t.head = (t.head + 1) % maxlen
}

func (t *topic) ordered() []Event {
	out := make([]Event, 0, len(t.events))
	out = append(out, t.events[t.head:]...)
	return append(out, t.events[:t.head]...)
}

func (s *State) dispatchEvents(st Stimulus) {
	switch x := st.(type) {
	case *LogEvent:
		s.handleLogEvent(x)
	case *SubscribeTopic:
		s.broker.topic(x.Topic).subscribers[x.Client] = true
	case *UnsubscribeTopic:
		delete(s.broker.topic(x.Topic).subscribers, x.Client)
	}
}

// handleLogEvent mirrors Broker.publish: one event (one timestamp) appended
// to every topic and sent to the topic's subscribers.
func (s *State) handleLogEvent(x *LogEvent) {
	msg := x.Msg
	if m, ok := msg.(*protocol.Map); ok && x.Worker != "" && !(len(x.Topics) == 1 && x.Topics[0] == x.Worker) {
		// log_worker_event: isinstance(msg, dict) and worker != topic
		c := &protocol.Map{Entries: append([]protocol.Entry(nil), m.Entries...)}
		c.Set("worker", x.Worker)
		msg = c
	}
	s.logEvent(x.Topics, msg)
}

// logEvent is Scheduler.log_event, also used by the engine's own events.
func (s *State) logEvent(topics []string, msg any) {
	e := Event{Time: s.unixNow(), Msg: msg}
	for _, name := range topics {
		t := s.broker.topic(name)
		t.publish(e, s.broker.maxlen)
		s.sendEvent(name, t, e)
		if s.hookMask != 0 {
			s.hook(HookEvent{Hook: HookLogEvent, Topic: name, Msg: msg})
		}
	}
}

// sendEvent is Broker._send_to_subscribers; clients in sorted order so the
// outbox is deterministic.
func (s *State) sendEvent(name string, t *topic, e Event) {
	if len(t.subscribers) == 0 {
		return
	}
	ids := make([]string, 0, len(t.subscribers))
	for id := range t.subscribers {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		if cs := s.clients[id]; cs != nil {
			s.toClient(cs, protocol.NewMap("op", "event", "topic", name, "event", e.wire()))
		}
	}
}

func (e Event) wire() []any { return []any{e.Time, e.Msg} }

// Events mirrors Broker.get_events(topic): the topic's events, oldest first.
func (s *State) Events(topic string) []any {
	t := s.broker.topics[topic]
	if t == nil {
		return []any{}
	}
	return wireEvents(t.ordered())
}

// AllEvents mirrors Broker.get_events(None): {topic: events} for the
// topics that have any.
func (s *State) AllEvents() *protocol.Map {
	names := make([]string, 0, len(s.broker.topics))
	for name, t := range s.broker.topics {
		if len(t.events) > 0 {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	out := &protocol.Map{}
	for _, name := range names {
		out.Set(name, wireEvents(s.broker.topics[name].ordered()))
	}
	return out
}

func wireEvents(evs []Event) []any {
	out := make([]any, len(evs))
	for i, e := range evs {
		out[i] = e.wire()
	}
	return out
}

// unsubscribeAll drops a departed client from every topic, so the broker
// never sends to a client id that is gone.
func (s *State) unsubscribeAll(client string) {
	for _, t := range s.broker.topics {
		delete(t.subscribers, client)
	}
}
