package coord

import (
	"daskgo/protocol"
)

// distributed.Queue: distributed/queues.py QueueExtension. Items are opaque data or a
// future's key; a future put in the queue is desired by the pseudo-client
// "queue-<name>" and counted per (queue, key), so the key stays alive until
// every copy taken out has been confirmed by its getter's
// queue-future-release (by then the getter's client desires it itself).

// QueueCreate is queue_create; every client using the queue creates it
// once (the queue counts them).
type QueueCreate struct {
	Call
	Name    string
	MaxSize int64
}

// QueueRelease is the queue_release stream op (Queue.close).
type QueueRelease struct {
	Name string
}

// QueuePut is queue_put. With Future, Key names the future; otherwise Data
// is the value, opaque.
type QueuePut struct {
	Call
	Name   string
	Future bool
	Key    protocol.Key
	Data   any
	NoWait bool // timeout 0
}

// QueueGet is queue_get. Batch: 0 for one item (the record is the
// answer), -1 for every item there is now (batch=True), n > 0 for n items.
type QueueGet struct {
	Call
	Name   string
	Batch  int64
	NoWait bool // timeout 0
}

// QueueSize is queue_qsize.
type QueueSize struct {
	Call
	Name string
}

// QueueFutureRelease is queue-future-release from Client's stream.
type QueueFutureRelease struct {
	Client string
	Name   string
	Key    protocol.Key
}

type queueItem struct {
	future bool
	key    protocol.Key
	data   any
}

type queueGetter struct {
	replyTo int64
	want    int64 // 0: one item, answered as a record
	got     []any
}

type queuePutter struct {
	replyTo int64
	item    queueItem
}

type sharedQueue struct {
	maxSize int64
	clients int64 // QueueExtension.client_refcount
	items   []queueItem
	getters []*queueGetter
	putters []queuePutter
}

type queueFuture struct {
	name string
	key  protocol.Key
}

type sharedQueueExt struct {
	queues  map[string]*sharedQueue
	futures map[queueFuture]int64 // QueueExtension.future_refcount
}

func queueClient(name string) string { return "queue-" + name }

func (c *Coordinator) dispatchQueue(op Op) bool {
	switch x := op.(type) {
	case *QueueCreate:
		c.queueCreate(x)
	case *QueueRelease:
		c.queueRelease(x.Name)
	case *QueuePut:
		c.queuePut(x)
	case *QueueGet:
		c.queueGet(x)
	case *QueueSize:
		if q := c.sharedQueue(x.Name, x.ReplyTo); q != nil {
			c.host.Reply(x.ReplyTo, int64(len(q.items)))
		}
	case *QueueFutureRelease:
		c.queueFutureRelease(x)
	default:
		return false
	}
	return true
}

// sharedQueue finds a queue, answering a KeyError (as self.queues[name]
// raises) when there is none.
func (c *Coordinator) sharedQueue(name string, replyTo int64) *sharedQueue {
	q := c.squeues.queues[name]
	if q == nil {
		c.host.Reply(replyTo, builtinError("KeyError", "%s", name))
	}
	return q
}

// queueCreate mirrors QueueExtension.create.
func (c *Coordinator) queueCreate(x *QueueCreate) {
	if c.squeues.queues == nil {
		c.squeues.queues = map[string]*sharedQueue{}
		c.squeues.futures = map[queueFuture]int64{}
	}
	if q := c.squeues.queues[x.Name]; q != nil {
		q.clients++
		return
	}
	c.squeues.queues[x.Name] = &sharedQueue{maxSize: x.MaxSize, clients: 1}
}

// queueRelease mirrors QueueExtension.release: the last client gone drops
// the queue and the futures still in it. Parked puts and gets fail (in
// distributed they would wait forever on a queue nobody can reach).
func (c *Coordinator) queueRelease(name string) {
	q := c.squeues.queues[name]
	if q == nil {
		return
	}
	if q.clients--; q.clients > 0 {
		return
	}
	delete(c.squeues.queues, name)
	var keys []protocol.Key
	for _, it := range q.items {
		if it.future {
			keys = append(keys, it.key)
		}
	}
	if len(keys) > 0 {
		c.host.ReleaseKeys(keys, queueClient(name))
	}
	gone := builtinError("RuntimeError", "queue %s was released", name)
	for _, g := range q.getters {
		c.answer(g.replyTo, gone)
	}
	for _, p := range q.putters {
		c.answer(p.replyTo, gone)
	}
}

// queuePut mirrors QueueExtension.put: the future is desired before the
// put may wait for room, as there.
func (c *Coordinator) queuePut(x *QueuePut) {
	q := c.sharedQueue(x.Name, x.ReplyTo)
	if q == nil {
		return
	}
	it := queueItem{future: x.Future, key: x.Key, data: x.Data}
	if x.Future {
		if !c.holdFuture(x.Key, queueClient(x.Name), x.ReplyTo) {
			return
		}
		c.squeues.futures[queueFuture{x.Name, x.Key}]++
	}
	if q.maxSize <= 0 || int64(len(q.items)) < q.maxSize {
		q.items = append(q.items, it)
		c.queueServe(q)
		return
	}
	if x.NoWait || x.ReplyTo == 0 {
		c.host.Reply(x.ReplyTo, builtinError("TimeoutError", "queue %s is full", x.Name))
		return
	}
	id := x.ReplyTo
	q.putters = append(q.putters, queuePutter{replyTo: id, item: it})
	c.park(id, func(why WaitEnd) {
		for i, p := range q.putters {
			if p.replyTo == id {
				q.putters = append(q.putters[:i], q.putters[i+1:]...)
				break
			}
		}
		c.timeoutAnswer(id, why, builtinError("TimeoutError", "queue %s stayed full", x.Name))
	})
}

// queueGet mirrors QueueExtension.get.
func (c *Coordinator) queueGet(x *QueueGet) {
	q := c.sharedQueue(x.Name, x.ReplyTo)
	if q == nil {
		return
	}
	if x.Batch < 0 { // batch=True: whatever is there now
		out := make([]any, 0, len(q.items))
		for len(q.items) > 0 {
			out = append(out, c.queueRecord(c.queuePop(q)))
		}
		c.host.Reply(x.ReplyTo, out)
		return
	}
	g := &queueGetter{replyTo: x.ReplyTo, want: x.Batch}
	q.getters = append(q.getters, g)
	c.queueServe(q)
	if !c.queueWaiting(q, g) {
		return
	}
	if x.NoWait || x.ReplyTo == 0 {
		q.getters = q.getters[:len(q.getters)-1]
		c.host.Reply(x.ReplyTo, builtinError("TimeoutError", "queue %s is empty", x.Name))
		return
	}
	id := x.ReplyTo
	c.park(id, func(why WaitEnd) {
		for i, w := range q.getters {
			if w == g {
				q.getters = append(q.getters[:i], q.getters[i+1:]...)
				break
			}
		}
		c.timeoutAnswer(id, why, builtinError("TimeoutError", "queue %s stayed empty", x.Name))
	})
}

func (c *Coordinator) queueWaiting(q *sharedQueue, g *queueGetter) bool {
	for _, w := range q.getters {
		if w == g {
			return true
		}
	}
	return false
}

// queueServe hands items to getters in arrival order and lets parked puts
// in as room frees up.
func (c *Coordinator) queueServe(q *sharedQueue) {
	for len(q.getters) > 0 && len(q.items) > 0 {
		g := q.getters[0]
		g.got = append(g.got, c.queueRecord(c.queuePop(q)))
		if int64(len(g.got)) < g.want {
			continue
		}
		q.getters = q.getters[1:]
		if g.want == 0 {
			c.answer(g.replyTo, g.got[0])
		} else {
			c.answer(g.replyTo, g.got)
		}
	}
}

// queuePop takes the oldest item; a parked put takes its place.
func (c *Coordinator) queuePop(q *sharedQueue) queueItem {
	it := q.items[0]
	q.items = q.items[1:]
	if len(q.putters) > 0 {
		p := q.putters[0]
		q.putters = q.putters[1:]
		q.items = append(q.items, p.item)
		c.answer(p.replyTo, nil)
	}
	return it
}

// queueRecord is QueueExtension.get's process(record).
func (c *Coordinator) queueRecord(it queueItem) *protocol.Map {
	if !it.future {
		return protocol.NewMap("type", "msgpack", "value", it.data)
	}
	m := protocol.NewMap("type", "Future", "value", it.key)
	c.addFutureState(m, it.key)
	return m
}

// queueFutureRelease mirrors QueueExtension.future_release.
func (c *Coordinator) queueFutureRelease(x *QueueFutureRelease) {
	c.host.DesireKeys([]protocol.Key{x.Key}, x.Client)
	f := queueFuture{x.Name, x.Key}
	n, ok := c.squeues.futures[f]
	if !ok {
		c.host.Logf(LogWarn, x.Key, "", x.Client, "queue %s: release of a future it does not hold", x.Name)
		return
	}
	if n <= 1 {
		delete(c.squeues.futures, f)
		c.host.ReleaseKeys([]protocol.Key{x.Key}, queueClient(x.Name))
		return
	}
	c.squeues.futures[f] = n - 1
}

// QueueFutureRefs is the refcount of key held by queue name (tests).
func (c *Coordinator) QueueFutureRefs(name string, key protocol.Key) int64 {
	return c.squeues.futures[queueFuture{name, key}]
}
