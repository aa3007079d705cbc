package protocol

import (
	"bytes"
	"testing"
)

// fuzzLimits are small so that the fuzzer explores limit edges rather than
// allocating: the invariant under test is "never panic, never exceed limits".
var fuzzLimits = Limits{MaxFrames: 64, MaxMessageBytes: 1 << 20}

// seedWire adds the golden messages (the real frames distributed writes)
// plus hand-made bad headers.
func seedWire(f *testing.F) {
	for _, v := range loadVectors(f) {
		if len(v.wire) <= 4<<10 { // small seeds keep minimization (60 s per new input by default) quick
			f.Add(v.wire)
		}
	}
	f.Add(prelude(16, 0))
	f.Add(prelude(24, 1<<60))
	f.Add(append(prelude(17, 1), 0xc0))
}

func FuzzReadFrames(f *testing.F) {
	seedWire(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		frames, err := ReadFrames(bytes.NewReader(data), fuzzLimits)
		if err != nil {
			return
		}
		total := 0
		for _, fr := range frames {
			total += len(fr)
		}
		if len(frames) > fuzzLimits.MaxFrames || int64(total) > fuzzLimits.MaxMessageBytes {
			t.Fatalf("limits exceeded: %d frames, %d bytes", len(frames), total)
		}
		var buf bytes.Buffer
		if err := WriteFrames(&buf, frames); err != nil {
			t.Fatal(err)
		}
		again, err := ReadFrames(&buf, fuzzLimits)
		if err != nil || !framesEqual(frames, again) {
			t.Fatalf("WriteFrames output not readable: %v", err)
		}
		checkDecodeRoundTrip(t, frames)
	})
}

func FuzzDecode(f *testing.F) {
	for _, v := range loadVectors(f) {
		frames, err := ReadFrames(bytes.NewReader(v.wire), DefaultLimits)
		if err != nil {
			f.Fatal(err)
		}
		for len(frames) < 3 {
			frames = append(frames, nil)
		}
		if len(frames[0])+len(frames[1])+len(frames[2]) <= 4<<10 {
			f.Add(frames[0], frames[1], frames[2])
		}
	}
	f.Fuzz(func(t *testing.T, f0, f1, f2 []byte) {
		checkDecodeRoundTrip(t, [][]byte{f0, f1, f2})
	})
}

// checkDecodeRoundTrip: whatever Decode accepts, Encode writes, Decode reads
// back, and a second Encode reproduces the first byte for byte. Every value
// KeyOf accepts renders and round-trips.
func checkDecodeRoundTrip(t *testing.T, frames [][]byte) {
	v, err := Decode(frames)
	if err != nil {
		return
	}
	_ = String(v)
	walk(v, func(x any) {
		if k, err := KeyOf(x); err == nil {
			_ = k.String()
			if k2, err := KeyOf(k.Value()); err != nil || k2 != k {
				t.Fatalf("key %x does not round-trip: %x %v", []byte(k), []byte(k2), err)
			}
		}
		if b, ok := x.(*Blob); ok {
			if p, err := b.PayloadFrames(1 << 20); err == nil {
				if h, err := b.SubHeader(); err == nil {
					_, _ = MergeSplitFrames(h, p)
				}
			}
		}
	})
	out, err := Encode(v, nil)
	if err != nil {
		t.Fatalf("decoded value does not encode: %v", err)
	}
	v2, err := Decode(out)
	if err != nil {
		t.Fatalf("re-encoded message does not decode: %v", err)
	}
	out2, err := Encode(v2, nil)
	if err != nil || !framesEqual(out, out2) {
		t.Fatalf("encoding is not stable: %v", err)
	}
}
