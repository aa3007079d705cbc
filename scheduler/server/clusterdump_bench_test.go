package server

import (
	"compress/gzip"
	"fmt"
	"io"
	"testing"

	"daskgo/protocol"
	"daskgo/scheduler"
)

// benchDump is an engine copy of n tasks shaped as the debug-dump
// benchmark's: n/2 roots in no-worker, each with one waiting dependent.
func benchDump(n int) *scheduler.ClusterDump {
	d := &scheduler.ClusterDump{Identity: protocol.NewMap("type", "Scheduler", "workers", protocol.NewMap())}
	ann := protocol.NewMap("workers", []any{"tcp://nowhere:9"})
	for i := 0; i < n/2; i++ {
		root, dep := protocol.StrKey(fmt.Sprintf("ones-%d", i)), protocol.StrKey(fmt.Sprintf("add-%d", i))
		lo := int32(len(d.Refs))
		depRef, rootRef := scheduler.Ref{Key: dep, State: scheduler.StatusWaiting}, scheduler.Ref{Key: root, State: scheduler.StatusNoWorker}
		d.Refs = append(d.Refs, depRef, depRef, rootRef, rootRef)
		d.Tasks = append(d.Tasks,
			scheduler.TaskDump{Key: root, State: scheduler.StatusNoWorker, Group: 0, NBytes: -1, ProcessingOn: -1, Rare: -1,
				HasPriority: true, Dependents: scheduler.Span{Lo: lo, Hi: lo + 1}, Waiters: scheduler.Span{Lo: lo + 1, Hi: lo + 2},
				Annotations: ann},
			scheduler.TaskDump{Key: dep, State: scheduler.StatusWaiting, Group: 1, NBytes: -1, ProcessingOn: -1, Rare: -1,
				HasPriority: true, Dependencies: scheduler.Span{Lo: lo + 2, Hi: lo + 3}, WaitingOn: scheduler.Span{Lo: lo + 3, Hi: lo + 4}})
	}
	d.Groups = []scheduler.GroupDump{{Name: "ones", Prefix: "ones"}, {Name: "add", Prefix: "add"}}
	return d
}

// BenchmarkDumpEncode: the dump of 100k tasks written as gzipped msgpack,
// outside the engine's lock.
func BenchmarkDumpEncode(b *testing.B) {
	d := benchDump(100_000)
	b.ReportAllocs()
	for range b.N {
		zw, _ := gzip.NewWriterLevel(io.Discard, gzip.BestSpeed)
		e := newDumpEncoder(zw, d, map[string]bool{"run_spec": true})
		e.schedulerSection()
		e.flush()
		_ = zw.Close()
	}
}
