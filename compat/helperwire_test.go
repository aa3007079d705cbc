package compat

import (
	"regexp"
	"slices"
	"testing"

	"daskgo/protocol"
)

// A materialize request carries the update-graph fields the helper reads
// and nothing else: the client's code and span metadata stay in Go.
func TestMaterializeRequestCarriesOnlyWhatTheHelperReads(t *testing.T) {
	msg := protocol.NewMap("op", "update-graph", "expr_ser", protocol.NewMap("x", int64(1)),
		"keys", []any{"k"}, "internal_priority", nil, "annotations", protocol.NewMap(),
		"code", []any{"print('a whole cell')"}, "span_metadata", protocol.NewMap("collections", []any{}),
		"fifo_timeout", "60s", "actors", nil, "submitting_task", nil)
	frames, err := encodeMaterializeRequest(7, msg, OrderingGo, false)
	if err != nil {
		t.Fatal(err)
	}
	v, err := protocol.Decode(frames)
	if err != nil {
		t.Fatal(err)
	}
	sent, _ := v.(*protocol.Map).Get("msg").(*protocol.Map)
	var got []string
	for _, e := range sent.Items() {
		got = append(got, e.Key.(string))
	}
	want := []string{"op", "expr_ser", "keys", "annotations", "internal_priority"}
	if !slices.Equal(got, want) {
		t.Fatalf("request's msg has %v, want %v", got, want)
	}
}

// Every field materializer.py reads from the update-graph message is one
// Go sends it: a field added there and not to materializeReads would read
// as absent.
func TestMaterializeReadsCoverTheHelpersReads(t *testing.T) {
	reads := regexp.MustCompile(`\bmsg(?:\.get\(|\[)"([a-z_]+)"`).FindAllStringSubmatch(materializerScript, -1)
	if len(reads) == 0 {
		t.Fatal("found no msg reads in materializer.py: the pattern is out of date")
	}
	for _, r := range reads {
		if !slices.Contains(materializeReads[:], r[1]) {
			t.Errorf("materializer.py reads msg[%q], which materializeReads does not send", r[1])
		}
	}
}
