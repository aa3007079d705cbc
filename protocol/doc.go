// Package protocol is distributed's wire format, byte for byte: frames on
// the stream, msgpack in frame 0, and the Serialize/Pickled envelopes whose
// payloads follow in later frames.
//
//	bytes ──ReadFrames──▶ [][]byte ──Decode──▶ value tree (*Map, []any, Key, *Blob, ...)
//	bytes ◀─WriteFrames── [][]byte ◀─Encode─── value tree
//
// Invariants:
//   - Go never unpickles user data. A *Blob keeps the sub-header and
//     sub-frames it arrived with; re-encoding it only renumbers its offset.
//   - Keys are held as their canonical msgpack bytes (Key), so a key is
//     re-emitted with exactly the types it came in with.
//   - bin stays bin ([]byte) and str stays str (string).
//   - Nothing is allocated for a frame beyond what has arrived or what
//     Limits allow: a header claiming 2^60 bytes fails before any buffer
//     exists.
//   - Compression (lz4 in python-lz4's block layout) applies only to
//     sub-frames of blobs Go makes itself; relayed blobs stay as they are.
//
// See ../shared/dask-protocol.md §1 for the format and the Python code it
// mirrors.
package protocol
