package compat

import (
	"bytes"
	"testing"

	"daskgo/protocol/pickle"
)

// A spec that uses a small table's object is spliced in one buffer of
// about its final size, never regrown (a regrown buffer is a new array of
// another capacity).
func TestPayloadSplicesInOneBuffer(t *testing.T) {
	obj := append([]byte("\x80\x05\x95"), bytes.Repeat([]byte{'x'}, 1500)...) // a cloudpickled function's size
	table := &objectTable{objs: [][]byte{obj}, size: len(obj)}
	spec := []byte("\x80\x05K\x00Q.") // PROTO 5, BININT1 0, BINPERSID, STOP
	if _, err := pickle.Scan(spec, 1); err != nil {
		t.Fatal(err)
	}
	ts := &TaskSpec{spec: spec, table: table}
	want, err := pickle.Splice(nil, spec, table.objs)
	if err != nil {
		t.Fatal(err)
	}
	got, err := ts.Payload().PickledObj()
	if err != nil || !bytes.Equal(got, want) {
		t.Fatalf("Payload = %q, %v; want %q", got, err, want)
	}
	if room := len(spec) + table.spliceRoom(); cap(got) != room || len(got) > room {
		t.Errorf("spliced %d bytes into a buffer of capacity %d, made with %d", len(got), cap(got), room)
	}
	big := &objectTable{objs: [][]byte{obj, obj, obj, obj, obj}, size: 5 * len(obj)}
	if r := big.spliceRoom(); r != 256 {
		t.Errorf("a table of 5 objects leaves %d bytes of room, want the fixed 256", r)
	}
}
