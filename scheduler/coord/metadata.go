package coord

import (
	"daskgo/protocol"
)

// Scheduler metadata: Scheduler.set_metadata / get_metadata, a nested dict
// (task_metadata) that clients read and write by key path. Values are kept
// as decoded (dicts as *protocol.Map, lists as []any) and copied on the way
// out, so a reply being encoded never shares a map a later set changes.

// SetMetadata is set_metadata.
type SetMetadata struct {
	Call
	Keys  []any
	Value any
}

// GetMetadata is get_metadata; without HasDefault a missing path is a
// KeyError, as there.
type GetMetadata struct {
	Call
	Keys       []any
	Default    any
	HasDefault bool
}

func (c *Coordinator) dispatchMetadata(op Op) bool {
	switch x := op.(type) {
	case *SetMetadata:
		c.setMetadata(x)
	case *GetMetadata:
		v, ok := c.Metadata(x.Keys)
		switch {
		case ok:
			c.host.Reply(x.ReplyTo, v)
		case x.HasDefault:
			c.host.Reply(x.ReplyTo, x.Default)
		default:
			c.host.Reply(x.ReplyTo, builtinError("KeyError", "%s", protocol.String(x.Keys)))
		}
	default:
		return false
	}
	return true
}

// setMetadata mirrors Scheduler.set_metadata: missing or non-container
// levels on the path become empty dicts.
func (c *Coordinator) setMetadata(x *SetMetadata) {
	if len(x.Keys) == 0 {
		c.host.Reply(x.ReplyTo, builtinError("ValueError", "set_metadata needs at least one key"))
		return
	}
	if c.metadata == nil {
		c.metadata = &protocol.Map{}
	}
	var node any = c.metadata
	for _, k := range x.Keys[:len(x.Keys)-1] {
		child, ok := metaChild(node, k)
		if !ok || !isContainer(child) {
			child = &protocol.Map{}
			if !metaPut(node, k, child) {
				c.host.Reply(x.ReplyTo, builtinError("TypeError", "metadata path %s: cannot index a list with %s", protocol.String(x.Keys), protocol.String(k)))
				return
			}
		}
		node = child
	}
	if !metaPut(node, x.Keys[len(x.Keys)-1], x.Value) {
		c.host.Reply(x.ReplyTo, builtinError("TypeError", "metadata path %s: cannot index a list with it", protocol.String(x.Keys)))
	}
}

// Metadata mirrors Scheduler.get_metadata: the value at the path, copied.
func (c *Coordinator) Metadata(keys []any) (any, bool) {
	var node any = c.metadata
	if c.metadata == nil {
		node = &protocol.Map{}
	}
	for _, k := range keys {
		child, ok := metaChild(node, k)
		if !ok {
			return nil, false
		}
		node = child
	}
	return metaCopy(node), true
}

func isContainer(v any) bool {
	switch v.(type) {
	case *protocol.Map, []any:
		return true
	}
	return false
}

func metaChild(node, k any) (any, bool) {
	switch n := node.(type) {
	case *protocol.Map:
		for _, e := range n.Entries {
			if sameMetaKey(e.Key, k) {
				return e.Value, true
			}
		}
	case []any:
		if i, ok := k.(int64); ok && i >= -int64(len(n)) && i < int64(len(n)) {
			if i < 0 {
				i += int64(len(n))
			}
			return n[i], true
		}
	}
	return nil, false
}

// metaPut sets node[k]; false if node is a list and k no index in it.
func metaPut(node, k, v any) bool {
	switch n := node.(type) {
	case *protocol.Map:
		for i, e := range n.Entries {
			if sameMetaKey(e.Key, k) {
				n.Entries[i].Value = v
				return true
			}
		}
		n.Entries = append(n.Entries, protocol.Entry{Key: k, Value: v})
		return true
	case []any:
		if i, ok := k.(int64); ok && i >= -int64(len(n)) && i < int64(len(n)) {
			if i < 0 {
				i += int64(len(n))
			}
			n[i] = v
			return true
		}
	}
	return false
}

// sameMetaKey is Python's dict key equality for the keys msgpack carries
// (str, int, float, tuples of those).
func sameMetaKey(a, b any) bool {
	ka, errA := protocol.KeyOf(a)
	kb, errB := protocol.KeyOf(b)
	if errA == nil && errB == nil {
		return ka == kb
	}
	return protocol.String(a) == protocol.String(b)
}

func metaCopy(v any) any {
	switch x := v.(type) {
	case *protocol.Map:
		out := &protocol.Map{Entries: make([]protocol.Entry, len(x.Entries))}
		for i, e := range x.Entries {
			out.Entries[i] = protocol.Entry{Key: e.Key, Value: metaCopy(e.Value)}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = metaCopy(e)
		}
		return out
	}
	return v
}
