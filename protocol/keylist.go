package protocol

// KeyList is a map keyed by dask keys held as a slice in key order, for
// the small per-dependency maps of compute-task (who_has, nbytes): it
// encodes exactly as the Go map of the same pairs does (a msgpack map whose
// keys are sorted, encode.go), without a hashed map built, filled and
// sorted per message, which cost about a tenth of the engine's CPU per task
// (BenchmarkEngineReplay). Invariant: keys are distinct and ascending, as
// SortKeyList leaves them.
type KeyList[V any] []KeyItem[V]

// KeyItem is one key and its value.
type KeyItem[V any] struct {
	Key   Key
	Value V
}

// Get returns the value of k.
func (l KeyList[V]) Get(k Key) (V, bool) {
	for _, it := range l {
		if it.Key == k {
			return it.Value, true
		}
	}
	var zero V
	return zero, false
}

// SortKeyList puts l in key order: an insertion sort, since the lists are a
// task's few dependencies.
func SortKeyList[V any](l KeyList[V]) {
	for i := 1; i < len(l); i++ {
		for j := i; j > 0 && l[j].Key < l[j-1].Key; j-- {
			l[j], l[j-1] = l[j-1], l[j]
		}
	}
}
