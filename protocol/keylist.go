package protocol

// KeyList is a map keyed by dask keys held as a slice in key order, for
// the small per-dependency maps of compute-task (who_has, nbytes): it
// encodes exactly as the Go map of the same pairs does (a msgpack map whose
// keys are sorted, encode.go), without a hashed map built, filled and
// sorted per message, which cost about a tenth of the engine's CPU per task
// (BenchmarkEngineReplay). Messages hold it by pointer, so that it can live
// inside the message's own allocation and an interface holding it
// allocates nothing; a nil *KeyList encodes as an empty map, as a nil Go
// map does. Invariant: keys are distinct and ascending, as Sort leaves them.
type KeyList[V any] struct {
	Items []KeyItem[V]
}

// KeyItem is one key and its value.
type KeyItem[V any] struct {
	Key   Key
	Value V
}

// Len is the number of keys.
func (l *KeyList[V]) Len() int {
	if l == nil {
		return 0
	}
	return len(l.Items)
}

func (l *KeyList[V]) items() []KeyItem[V] {
	if l == nil {
		return nil
	}
	return l.Items
}

// Get returns the value of k.
func (l *KeyList[V]) Get(k Key) (V, bool) {
	if l != nil {
		for _, it := range l.Items {
			if it.Key == k {
				return it.Value, true
			}
		}
	}
	var zero V
	return zero, false
}

// Sort puts the items in key order: an insertion sort, since the lists are
// a task's few dependencies.
func (l *KeyList[V]) Sort() {
	it := l.Items
	for i := 1; i < len(it); i++ {
		for j := i; j > 0 && it[j].Key < it[j-1].Key; j-- {
			it[j], it[j-1] = it[j-1], it[j]
		}
	}
}
