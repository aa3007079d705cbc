package coord

import (
	"sort"

	"daskgo/protocol"
)

// Published datasets: distributed/publish.py PublishExtension. A dataset
// is the client's serialized collection (opaque, returned as sent) and the
// keys of its futures, which the pseudo-client "published-<name>" desires
// so they outlive the publishing client. publish_put and publish_delete
// first wait for the client's publish_flush_batched_send with the same uid
// (PublishExtension._sync_batched_send): that op comes on the client's
// stream after the update-graph of the futures being published, so once it
// is handled those keys are known.

// PublishPut is publish_put.
type PublishPut struct {
	Call
	Client   string
	UID      string
	Names    []any // as sent (str, or any dask key)
	Keys     [][]protocol.Key
	Data     []any
	Override bool
}

// PublishDelete is publish_delete.
type PublishDelete struct {
	Call
	Client string
	UID    string
	Names  []any
}

// PublishFlush is publish_flush_batched_send from Client's stream.
type PublishFlush struct {
	Client string
	UID    string
}

// PublishList is publish_list: the names, sorted by str().
type PublishList struct {
	Call
}

// PublishGet is publish_get: per name, {"data", "keys"} or None.
type PublishGet struct {
	Call
	Names []any
}

type dataset struct {
	name any
	data any
	keys []protocol.Key
}

type publishExt struct {
	datasets map[string]*dataset // by datasetID(name)
	flushed  map[string]bool     // uids whose flush arrived first
	blocked  map[string]Op       // uid -> put/delete waiting for its flush
}

func (p *publishExt) init() {
	if p.datasets == nil {
		p.datasets = map[string]*dataset{}
		p.flushed = map[string]bool{}
		p.blocked = map[string]Op{}
	}
}

// datasetID is stringify(name): the name itself for a str, its repr for
// other keys.
func datasetID(name any) string {
	if s, ok := name.(string); ok {
		return s
	}
	if k, err := protocol.KeyOf(name); err == nil {
		return k.String()
	}
	return protocol.String(name)
}

func publishClient(name any) string { return "published-" + datasetID(name) }

func (c *Coordinator) dispatchPublish(op Op) bool {
	p := &c.publish
	p.init()
	switch x := op.(type) {
	case *PublishPut:
		c.publishSynced(x.UID, x.ReplyTo, x, func() any { return c.publishPut(x) })
	case *PublishDelete:
		c.publishSynced(x.UID, x.ReplyTo, x, func() any { c.publishDelete(x); return nil })
	case *PublishFlush:
		c.publishFlush(x.UID)
	case *PublishList:
		c.host.Reply(x.ReplyTo, c.PublishedNames())
	case *PublishGet:
		out := make([]any, len(x.Names))
		for i, name := range x.Names {
			if d := p.datasets[datasetID(name)]; d != nil {
				out[i] = protocol.NewMap("data", d.data, "keys", d.keys)
			}
		}
		c.host.Reply(x.ReplyTo, out)
	default:
		return false
	}
	return true
}

// publishSynced runs op now if its uid's flush arrived, else parks it
// until publishFlush (a caller that gives up just forgets it).
func (c *Coordinator) publishSynced(uid string, replyTo int64, blocked Op, run func() any) {
	p := &c.publish
	if p.flushed[uid] || uid == "" {
		delete(p.flushed, uid)
		c.host.Reply(replyTo, run())
		return
	}
	p.blocked[uid] = blocked
	c.park(replyTo, func(why WaitEnd) {
		delete(p.blocked, uid)
		c.timeoutAnswer(replyTo, why, builtinError("TimeoutError", "publish: the client's stream did not catch up"))
	})
}

func (c *Coordinator) publishFlush(uid string) {
	p := &c.publish
	p.init()
	op, ok := p.blocked[uid]
	if !ok {
		p.flushed[uid] = true
		return
	}
	delete(p.blocked, uid)
	switch x := op.(type) {
	case *PublishPut:
		c.answer(x.ReplyTo, c.publishPut(x))
	case *PublishDelete:
		c.publishDelete(x)
		c.answer(x.ReplyTo, nil)
	}
}

// publishPut mirrors PublishExtension.put; the answer is nil or the
// KeyError of a name taken (the names before it are published, as there).
func (c *Coordinator) publishPut(x *PublishPut) any {
	p := &c.publish
	for i, name := range x.Names {
		id := datasetID(name)
		if old := p.datasets[id]; old != nil {
			if !x.Override {
				return builtinError("KeyError", "Dataset %s already exists", id)
			}
			delete(p.datasets, id)
			c.host.ReleaseKeys(old.keys, publishClient(name))
		}
		var keys []protocol.Key
		if i < len(x.Keys) {
			keys = x.Keys[i]
		}
		var data any
		if i < len(x.Data) {
			data = x.Data[i]
		}
		c.host.DesireKeys(keys, publishClient(name))
		p.datasets[id] = &dataset{name: name, data: data, keys: keys}
	}
	return nil
}

// publishDelete mirrors PublishExtension.delete.
func (c *Coordinator) publishDelete(x *PublishDelete) {
	p := &c.publish
	for _, name := range x.Names {
		id := datasetID(name)
		if d := p.datasets[id]; d != nil {
			delete(p.datasets, id)
			c.host.ReleaseKeys(d.keys, publishClient(name))
		}
	}
}

// PublishedNames is publish_list: names sorted by str().
func (c *Coordinator) PublishedNames() []any {
	ids := make([]string, 0, len(c.publish.datasets))
	for id := range c.publish.datasets {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make([]any, len(ids))
	for i, id := range ids {
		out[i] = c.publish.datasets[id].name
	}
	return out
}
