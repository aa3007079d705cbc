package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"runtime"
	"testing"
	"testing/iotest"
)

// cutPoints is every byte boundary of a small message; for the few large
// vectors, every boundary in the prelude and around each frame edge plus a
// stride through the payload (each cut re-reads the message).
func cutPoints(wire []byte, lens []int) []int {
	if len(wire) <= 40_000 {
		out := make([]int, 0, len(wire))
		for c := 0; c < len(wire); c++ {
			out = append(out, c)
		}
		return out
	}
	prelude := 16 + 8*len(lens)
	seen := map[int]bool{}
	var out []int
	add := func(c int) {
		if c >= 0 && c < len(wire) && !seen[c] {
			seen[c] = true
			out = append(out, c)
		}
	}
	for c := 0; c <= prelude+1; c++ {
		add(c)
	}
	edge := prelude
	for _, l := range lens {
		edge += l
		for d := -2; d <= 2; d++ {
			add(edge + d)
		}
	}
	for c := prelude; c < len(wire); c += 997 {
		add(c)
	}
	return out
}

// TestReadFramesSplitAtEveryBoundary feeds each golden message one byte per
// Read, and in two pieces cut at every boundary: the frames must not depend
// on how the stream is chunked.
func TestReadFramesSplitAtEveryBoundary(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			want := readVector(t, v)
			got, err := ReadFrames(iotest.OneByteReader(bytes.NewReader(v.wire)), DefaultLimits)
			if err != nil || !framesEqual(got, want) {
				t.Fatalf("one byte at a time: %v", err)
			}
			for _, c := range cutPoints(v.wire, v.FrameLengths) {
				r := io.MultiReader(bytes.NewReader(v.wire[:c]), iotest.HalfReader(bytes.NewReader(v.wire[c:])))
				got, err := ReadFrames(r, DefaultLimits)
				if err != nil || !framesEqual(got, want) {
					t.Fatalf("split at %d: %v", c, err)
				}
			}
		})
	}
}

// TestReadFramesTruncatedAtEveryBoundary cuts each message short: a cut
// before the first byte is a clean io.EOF, any other cut io.ErrUnexpectedEOF,
// never a panic or a half message.
func TestReadFramesTruncatedAtEveryBoundary(t *testing.T) {
	for _, v := range loadVectors(t) {
		t.Run(v.Name, func(t *testing.T) {
			for _, c := range cutPoints(v.wire, v.FrameLengths) {
				frames, err := ReadFrames(bytes.NewReader(v.wire[:c]), DefaultLimits)
				switch {
				case frames != nil:
					t.Fatalf("cut at %d returned %d frames", c, len(frames))
				case c == 0 && err != io.EOF:
					t.Fatalf("cut at 0: got %v, want io.EOF", err)
				case c > 0 && !errors.Is(err, io.ErrUnexpectedEOF):
					t.Fatalf("cut at %d: got %v, want io.ErrUnexpectedEOF", c, err)
				}
			}
		})
	}
}

func framesEqual(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

func prelude(gulp uint64, lens ...uint64) []byte {
	b := binary.LittleEndian.AppendUint64(nil, gulp)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(lens)))
	for _, l := range lens {
		b = binary.LittleEndian.AppendUint64(b, l)
	}
	return b
}

// TestReadFramesRejectsBadHeaders: absurd counts and lengths are refused
// from the header alone with a FrameError, before any large allocation.
func TestReadFramesRejectsBadHeaders(t *testing.T) {
	lim := Limits{MaxFrames: 1000, MaxMessageBytes: 1 << 20}
	tests := []struct {
		name string
		in   []byte
	}{
		{"zero frames", prelude(8)},
		{"2^60 frames", append(binary.LittleEndian.AppendUint64(make([]byte, 8), 1<<60), make([]byte, 64)...)},
		{"max u64 frames", append(binary.LittleEndian.AppendUint64(make([]byte, 8), math64), make([]byte, 64)...)},
		{"frame of 2^60 bytes", prelude(24, 1<<60)},
		{"frame of 2^64-1 bytes", prelude(24, math64)},
		{"lengths overflow in sum", prelude(32, 1<<19, 1<<19, 1)},
		{"first-read below prelude", append(prelude(8, 1), 'x')},
		{"first-read beyond message", append(prelude(100, 1), 'x')},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			frames, err := ReadFrames(bytes.NewReader(tt.in), lim)
			var fe *FrameError
			if frames != nil || !errors.As(err, &fe) {
				t.Fatalf("got %d frames, err %v; want a FrameError", len(frames), err)
			}
			if fe.Reason == "" || len(fe.Header) == 0 {
				t.Fatalf("FrameError without evidence: %+v", fe)
			}
		})
	}
}

const math64 = ^uint64(0)

// TestReadFramesAbsurdHeaderAllocatesLittle: a peer that declares the
// largest message the limits allow (2^20 frames, 16 GiB) and then sends
// nothing costs at most a couple of MiB, not what it declared.
func TestReadFramesAbsurdHeaderAllocatesLittle(t *testing.T) {
	declared := binary.LittleEndian.AppendUint64(make([]byte, 8), 1<<20) // 2^20 frames
	declared = binary.LittleEndian.AppendUint64(declared, 1<<30)         // only one length follows
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	_, err := ReadFrames(bytes.NewReader(declared), DefaultLimits)
	runtime.ReadMemStats(&ms1)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
	}
	if got := ms1.TotalAlloc - ms0.TotalAlloc; got > 4<<20 {
		t.Fatalf("allocated %d bytes for a header promising 16 GiB", got)
	}

	// One frame of 15 GiB declared, 10 bytes sent.
	big := append(prelude(16+15<<30, 15<<30), make([]byte, 10)...)
	runtime.ReadMemStats(&ms0)
	_, err = ReadFrames(bytes.NewReader(big), DefaultLimits)
	runtime.ReadMemStats(&ms1)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("got %v, want io.ErrUnexpectedEOF", err)
	}
	if got := ms1.TotalAlloc - ms0.TotalAlloc; got > 4<<20 {
		t.Fatalf("allocated %d bytes for a 10-byte body", got)
	}
}

func TestReadFramesZeroLimitsMeanDefaults(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteFrames(&buf, [][]byte{{0xc0}, {}, []byte("abc")}); err != nil {
		t.Fatal(err)
	}
	frames, err := ReadFrames(&buf, Limits{})
	if err != nil || len(frames) != 3 || len(frames[1]) != 0 || string(frames[2]) != "abc" {
		t.Fatalf("got %q, %v", frames, err)
	}
}

// TestFramesLargeMessage crosses the 1 MiB read chunk: a 3 MiB frame between
// small ones comes back intact, and frames cannot grow into each other.
func TestFramesLargeMessage(t *testing.T) {
	bigFrame := bytes.Repeat([]byte("0123456789abcdef"), 3<<16)
	in := [][]byte{{0x91, 0xc0}, []byte("hdr"), bigFrame, []byte("tail")}
	var buf bytes.Buffer
	if err := WriteFrames(&buf, in); err != nil {
		t.Fatal(err)
	}
	out, err := ReadFrames(iotest.HalfReader(&buf), DefaultLimits)
	if err != nil || !framesEqual(in, out) {
		t.Fatalf("round trip: %v", err)
	}
	_ = append(out[0], 'X')
	if !bytes.Equal(out[1], []byte("hdr")) {
		t.Fatal("appending to frame 0 overwrote frame 1")
	}
}

func TestFramesHeaderMatchesPython(t *testing.T) {
	// pack_frames_prelude([b"ab", b"", b"c"]) with N = prelude + 3 bytes.
	want := prelude(8*4+3, 2, 0, 1)
	if got := FramesHeader([][]byte{[]byte("ab"), {}, []byte("c")}); !bytes.Equal(got, want) {
		t.Fatalf("got %x, want %x", got, want)
	}
}

type errWriter struct{ n int }

func (w *errWriter) Write(p []byte) (int, error) {
	if w.n <= 0 {
		return 0, io.ErrClosedPipe
	}
	w.n--
	return len(p), nil
}

// A failed write is reported: a small message's one write, and a big
// message's write after others went through (it goes buffer by buffer).
func TestWriteFramesReportsWriteErrors(t *testing.T) {
	if err := WriteFrames(&errWriter{n: 0}, [][]byte{[]byte("a"), []byte("b")}); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("small message: got %v", err)
	}
	big := make([]byte, coalesceMax)
	if err := WriteFrames(&errWriter{n: 1}, [][]byte{[]byte("a"), big}); !errors.Is(err, io.ErrClosedPipe) {
		t.Fatalf("big message, failing on its second write: got %v", err)
	}
}

// A small message goes in one write, a big one from where its frames lie;
// both arrive whole.
func TestWriteFramesWritesASmallMessageOnce(t *testing.T) {
	for _, size := range []int{10, coalesceMax} {
		frames := [][]byte{[]byte("head"), bytes.Repeat([]byte("x"), size)}
		w := &countingWriter{}
		if err := WriteFrames(w, frames); err != nil {
			t.Fatal(err)
		}
		if small := size < coalesceMax; small != (w.writes == 1) {
			t.Errorf("%d-byte frame: %d writes", size, w.writes)
		}
		out, err := ReadFrames(&w.buf, DefaultLimits)
		if err != nil || !framesEqual(frames, out) {
			t.Fatalf("%d-byte frame: round trip: %v", size, err)
		}
	}
}

type countingWriter struct {
	buf    bytes.Buffer
	writes int
}

func (w *countingWriter) Write(p []byte) (int, error) {
	w.writes++
	return w.buf.Write(p)
}
