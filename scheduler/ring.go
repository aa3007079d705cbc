package scheduler

// ring keeps the last max values appended, oldest first (a bounded deque,
// like the collections.deque(maxlen=...) distributed's task streams are),
// and counts every append ever made, so a reader can ask for what is new
// since its last look. max <= 0 keeps nothing.
type ring[T any] struct {
	buf   []T
	head  int // position of the oldest value once buf is full
	max   int
	total int64 // values ever appended
}

func (r *ring[T]) add(v T) {
	if r.max <= 0 {
		return
	}
	r.total++
	if len(r.buf) < r.max {
		r.buf = append(r.buf, v)
		return
	}
	r.buf[r.head] = v
	r.head = (r.head + 1) % r.max
}

func (r *ring[T]) len() int { return len(r.buf) }

// at is the i-th oldest value kept.
func (r *ring[T]) at(i int) *T { return &r.buf[(r.head+i)%len(r.buf)] }

// items copies the values kept, oldest first.
func (r *ring[T]) items() []T {
	out := make([]T, 0, len(r.buf))
	out = append(out, r.buf[r.head:]...)
	return append(out, r.buf[:r.head]...)
}
