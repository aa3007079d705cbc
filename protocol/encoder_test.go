package protocol

import (
	"bytes"
	"testing"
)

// One Encoder, reused across every golden vector in turn (and twice over,
// so that buffers grown by a large message serve a small one), writes the
// same frames as Encode.
func TestEncoderReuseMatchesEncode(t *testing.T) {
	var enc Encoder
	vectors := loadVectors(t)
	for round := range 2 {
		for _, v := range vectors {
			val, err := Decode(readVector(t, v))
			if err != nil {
				t.Fatalf("%s: %v", v.Name, err)
			}
			want, err := Encode(val, nil)
			if err != nil {
				t.Fatalf("%s: %v", v.Name, err)
			}
			got, err := enc.Encode(val)
			if err != nil {
				t.Fatalf("%s: %v", v.Name, err)
			}
			if len(got) != len(want) {
				t.Fatalf("round %d, %s: %d frames, want %d", round, v.Name, len(got), len(want))
			}
			for i := range want {
				if !bytes.Equal(got[i], want[i]) {
					t.Fatalf("round %d, %s: frame %d differs", round, v.Name, i)
				}
			}
			enc.Release()
		}
	}
}

// A Go-made pickled blob's sub-header, written directly, is the msgpack of
// the dict distributed's pickle serializer makes ({"pickled-obj", then
// "compression", then "num-sub-frames"}), whatever the buffers and codec;
// two blobs in one message get their own sub-header frames.
func TestPickledSubHeaderIsTheDict(t *testing.T) {
	pickle := bytes.Repeat([]byte{0x80, 5, 'K', 1, '.'}, 300)
	big := bytes.Repeat([]byte("abcd"), 4096) // compressible
	cases := []struct {
		name  string
		codec string
		bufs  [][]byte
		names []any
	}{
		{"no buffers", "", nil, []any{}},
		{"two buffers", "", [][]byte{[]byte("x"), []byte("y")}, []any{nil, nil}},
		{"lz4", "lz4", [][]byte{big}, []any{"lz4"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			enc := Encoder{Compression: c.codec}
			msg := []any{NewMap("run_spec", NewPickled(pickle, c.bufs...)), NewMap("run_spec", NewPickled(pickle[:10], c.bufs...))}
			frames, err := enc.Encode(msg)
			if err != nil {
				t.Fatal(err)
			}
			second := 2 + len(c.bufs)
			for _, h := range []struct {
				at     int
				pickle []byte
			}{{1, pickle}, {second, pickle[:10]}} {
				want, err := Encode(NewMap("pickled-obj", h.pickle, "compression", c.names, "num-sub-frames", int64(len(c.bufs))), nil)
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(frames[h.at], want[0]) {
					t.Fatalf("sub-header at frame %d:\n got %x\nwant %x", h.at, clip(frames[h.at]), clip(want[0]))
				}
			}
			back, err := Decode(frames)
			if err != nil {
				t.Fatal(err)
			}
			for i, m := range back.([]any) {
				b, ok := m.(*Map).Get("run_spec").(*Blob)
				if !ok || !b.Pickled {
					t.Fatalf("message %d: run_spec did not come back as a pickled blob", i)
				}
			}
		})
	}
}

// Messages read into one reused scratch buffer decode to values that stay
// intact when the next message overwrites it: Decode keeps nothing of
// frame 0 (strings, bin and keys are copies).
func TestReadFramesReusingKeepsNothing(t *testing.T) {
	var wire bytes.Buffer
	for i := range 3 {
		frames, err := Encode([]any{NewMap("op", "task-finished", "key", []any{"inc-x", int64(i)},
			"type", []byte{byte(i), 1, 2}, "stimulus_id", "s-"+string(rune('a'+i)))}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if err := WriteFrames(&wire, frames); err != nil {
			t.Fatal(err)
		}
	}
	scratch := make([]byte, 4096)
	var got []any
	for range 3 {
		frames, err := ReadFramesReusing(&wire, DefaultLimits, scratch)
		if err != nil {
			t.Fatal(err)
		}
		if &frames[0][0] != &scratch[0] {
			t.Fatal("a one-frame message did not go into the scratch buffer")
		}
		v, err := Decode(frames)
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, v.([]any)[0])
	}
	for i, v := range got {
		m := v.(*Map)
		if !bytes.Equal(m.Get("type").([]byte), []byte{byte(i), 1, 2}) || m.Get("stimulus_id") != "s-"+string(rune('a'+i)) {
			t.Fatalf("message %d changed after later reads: %s", i, String(m))
		}
		if k, err := KeyOf(m.Get("key")); err != nil || k.String() != mustKey(t, []any{"inc-x", int64(i)}).String() {
			t.Fatalf("message %d's key changed: %v", i, err)
		}
	}
}

// A blob marker may not point at frame 0 (the msgpack itself): a value
// aliasing frame 0 would change when a reader reuses that buffer.
func TestDecodeRefusesBlobAtFrameZero(t *testing.T) {
	frames, err := Encode(NewMap("x", NewMap("__Serialized__", int64(0)), "num-sub-frames", int64(0)), nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Decode(frames); err == nil {
		t.Fatal("a blob at frame 0 was accepted")
	}
}

// appendWriter is a PickleWriter of fixed bytes.
type appendWriter []byte

func (w appendWriter) AppendPickle(dst []byte) []byte { return append(dst, w...) }

// A blob whose pickle is written at encoding time encodes to the very
// frames of one made from the same pickle, at every msgpack bin size.
func TestPickledByEncodesAsPickled(t *testing.T) {
	for _, n := range []int{0, 10, 255, 256, 300, 65535, 65536, 70000} {
		p := make([]byte, n)
		for i := range p {
			p[i] = byte(i * 7)
		}
		msg := func(b *Blob) *Map { return NewMap("op", "compute-task", "run_spec", b, "key", "x") }
		want, err := Encode(msg(NewPickled(p)), nil)
		if err != nil {
			t.Fatal(err)
		}
		var enc Encoder
		got, err := enc.Encode(msg(NewPickledBy(appendWriter(p))))
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%d bytes: %d frames, want %d", n, len(got), len(want))
		}
		for i := range want {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("%d bytes: frame %d differs", n, i)
			}
		}
		obj, err := NewPickledBy(appendWriter(p)).PickledObj()
		if err != nil || !bytes.Equal(obj, p) {
			t.Fatalf("%d bytes: PickledObj %v", n, err)
		}
	}
}
