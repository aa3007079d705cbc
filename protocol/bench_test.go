package protocol

import (
	"bytes"
	"io"
	"os"
	"testing"
)

// Benchmarks for the hot paths: every scheduler<->worker batch is decoded or
// encoded once, and payload frames pass through ReadFrames/WriteFrames.
// Inputs are the golden Python messages, replicated into realistic batches.

func benchBatch(b *testing.B, vector string, copies int) [][]byte {
	b.Helper()
	wire, err := os.ReadFile("testdata/golden/" + vector + ".bin")
	if err != nil {
		b.Fatal(err)
	}
	frames, err := ReadFrames(bytes.NewReader(wire), DefaultLimits)
	if err != nil {
		b.Fatal(err)
	}
	var batch []any
	for i := 0; i < copies; i++ {
		v, err := Decode(frames) // fresh blobs each time: one batch, many ops
		if err != nil {
			b.Fatal(err)
		}
		batch = append(batch, v.([]any)...)
	}
	out, err := Encode(batch, nil)
	if err != nil {
		b.Fatal(err)
	}
	return out
}

func benchDecodeEncode(b *testing.B, frames [][]byte) {
	size := 0
	for _, f := range frames {
		size += len(f)
	}
	b.SetBytes(int64(size))
	b.ReportAllocs()
	for b.Loop() {
		v, err := Decode(frames)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := Encode(v, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// 300 compute-task ops with __Pickled__ run_specs and tuple keys.
func BenchmarkDecodeEncodeComputeTaskBatch(b *testing.B) {
	benchDecodeEncode(b, benchBatch(b, "batch_compute_task", 100))
}

// 500 task-finished ops.
func BenchmarkDecodeEncodeTaskFinishedBatch(b *testing.B) {
	benchDecodeEncode(b, benchBatch(b, "batch_task_finished", 100))
}

func BenchmarkDecodeComputeTaskBatch(b *testing.B) {
	frames := benchBatch(b, "batch_compute_task", 100)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Decode(frames); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkEncodeComputeTaskBatch(b *testing.B) {
	v, err := Decode(benchBatch(b, "batch_compute_task", 100))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Encode(v, nil); err != nil {
			b.Fatal(err)
		}
	}
}

func oneMiBMessage() [][]byte {
	return [][]byte{{0x81, 0xa4, 'd', 'a', 't', 'a', 0x81, 0xae, '_', '_', 'S', 'e', 'r', 'i', 'a', 'l', 'i', 'z', 'e', 'd', '_', '_', 0x01},
		{0x81, 0xae, 'n', 'u', 'm', '-', 's', 'u', 'b', '-', 'f', 'r', 'a', 'm', 'e', 's', 0x01}, make([]byte, 1<<20)}
}

func BenchmarkWriteFrames1MiB(b *testing.B) {
	frames := oneMiBMessage()
	b.SetBytes(1 << 20)
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteFrames(io.Discard, frames); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadFrames1MiB(b *testing.B) {
	var buf bytes.Buffer
	if err := WriteFrames(&buf, oneMiBMessage()); err != nil {
		b.Fatal(err)
	}
	wire := buf.Bytes()
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadFrames(bytes.NewReader(wire), DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
}

// A batch of 64 small frames (a relayed update-graph batch) in one message.
func BenchmarkReadFramesManySmall(b *testing.B) {
	frames := make([][]byte, 64)
	for i := range frames {
		frames[i] = bytes.Repeat([]byte{byte(i)}, 200)
	}
	var buf bytes.Buffer
	if err := WriteFrames(&buf, frames); err != nil {
		b.Fatal(err)
	}
	wire := buf.Bytes()
	b.SetBytes(int64(len(wire)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := ReadFrames(bytes.NewReader(wire), DefaultLimits); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkKeyOf(b *testing.B) {
	tuple := []any{"sum-582e71978d0242c961171edeefba6d81", int64(3), int64(14)}
	b.Run("str", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = KeyOf("inc-582e71978d0242c961171edeefba6d81")
		}
	})
	b.Run("tuple", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = KeyOf(tuple)
		}
	})
	k, _ := KeyOf(tuple)
	b.Run("String", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = k.String()
		}
	})
}
