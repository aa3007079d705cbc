package compat

import (
	"daskgo/protocol"
	"daskgo/protocol/pickle"
	"daskgo/scheduler"
)

// objectTable is one graph's callables as the helper pickled them, once
// each (helper_wire.py, pickle.Splice). It grows while the graph's chunks
// arrive and is read-only once the graph is handed to the engine; every
// TaskSpec of the graph that refers to it keeps it alive.
type objectTable struct {
	objs [][]byte
	size int // the objects' bytes, summed
}

// spliceRoom is the room Payload leaves after the spec for the objects
// spliced in: the table's total with each object's pickle.loads wrapper
// (pickle.appendLoads, under 32 bytes) when the table is small, so that a
// spec is spliced in one buffer of about its final size (a map of a
// cloudpickled function regrew it once per task: an allocation and a copy
// of the whole spec); a fixed 256 bytes otherwise, growing as needed.
func (t *objectTable) spliceRoom() int {
	const maxObjs, maxBytes = 4, 16 << 10
	if len(t.objs) > maxObjs || t.size > maxBytes {
		return 256
	}
	return t.size + 32*len(t.objs)
}

// TaskSpec is the run_spec of a task from the helper: its GraphNode pickled
// with references into the graph's object table (pickle.Prepare has
// renumbered its memo), plus that table. The engine holds this (a few
// hundred bytes per task) instead of the full pickle; Payload assembles
// what a worker loads when the task is sent.
type TaskSpec struct {
	spec  []byte
	table *objectTable // nil: spec has no table references and is final
}

var _ scheduler.RunSpec = (*TaskSpec)(nil)

// Payload implements scheduler.RunSpec. A spec with table references is
// spliced when its message is encoded (AppendPickle), by the goroutine that
// writes it, not by the engine that builds the message.
func (t *TaskSpec) Payload() *protocol.Blob {
	if t.table == nil {
		return protocol.NewPickled(t.spec)
	}
	return protocol.NewPickledBy(t)
}

// SizeHint is the spliced pickle's size or more: the spec and every object
// of the table (the objects it refers to are a subset), for
// protocol.Map.BlobBytes.
func (t *TaskSpec) SizeHint() int { return len(t.spec) + t.table.size }

// AppendPickle implements protocol.PickleWriter: the spec with the graph's
// objects spliced in, appended to dst.
func (t *TaskSpec) AppendPickle(dst []byte) []byte {
	if dst == nil {
		dst = make([]byte, 0, len(t.spec)+t.table.spliceRoom())
	}
	out, err := pickle.Splice(dst, t.spec, t.table.objs)
	if err != nil {
		// unreachable: graphBuilder.add rejects a spec that Prepare finds
		// malformed, and Splice fails on nothing Prepare accepts. Were it
		// reached, the worker would fail to load the references and
		// report the task erred, naming the pickle error.
		return append(dst, t.spec...)
	}
	return out
}

// Size is the bytes the spec holds of its own (the shared table not
// counted).
func (t *TaskSpec) Size() int { return len(t.spec) }
