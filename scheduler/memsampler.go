package scheduler

import "daskgo/scheduler/coord"

// The MemorySampler's scheduler side (distributed.diagnostics.
// memory_sampler.MemorySamplerExtension): named series of one memory
// measure (memory.go), one point per MemorySample. The outer ring sends
// MemorySample at the interval the client asked for, and only while a
// sample runs: a scheduler nobody samples keeps no sampler and no timer.
// A sample whose client has left is freed at once (removeClient), where
// distributed frees it at its next tick; either way its samples are gone.

// MemoryPoint is one sample: unix seconds and bytes.
type MemoryPoint struct {
	At    float64
	Bytes int64
}

type memSampler struct {
	client, measure string
	points          []MemoryPoint
}

// startMemorySampler mirrors MemorySamplerExtension.start, which takes
// the first sample at once (so a series always has one). A client unknown
// to the scheduler gets nothing: distributed's first sample would stop it.
func (s *State) startMemorySampler(x *MemorySamplerStart) {
	if s.clients[x.Client] == nil {
		s.logf(LogWarn, "", "", x.Client, "memory sampler %s of unknown client %s not started", x.Key, x.Client)
		return
	}
	if s.samplers == nil {
		s.samplers = map[string]*memSampler{}
	}
	s.samplers[x.Key] = &memSampler{client: x.Client, measure: x.Measure}
	s.memorySample(x.Key)
}

// memorySample appends the measure now to the sample under key and says
// whether it still runs: false for a key not sampling.
func (s *State) memorySample(key string) bool {
	ms := s.samplers[key]
	if ms == nil {
		return false
	}
	if s.clients[ms.client] == nil { // never: removeClient frees them
		s.dropSampler(key)
		return false
	}
	v, _ := s.Memory().Measure(ms.measure)
	ms.points = append(ms.points, MemoryPoint{At: s.unixNow(), Bytes: v})
	return true
}

// stopMemorySampler mirrors MemorySamplerExtension.stop: the samples, or
// KeyError (samples.pop(key)) for a key not sampling.
func (s *State) stopMemorySampler(x *MemorySamplerStop) {
	ms := s.samplers[x.Key]
	if ms == nil {
		s.reply(x.ReplyTo, &coord.RemoteException{Module: "builtins", Class: "KeyError", Text: x.Key})
		return
	}
	s.dropSampler(x.Key)
	points := ms.points
	if points == nil {
		points = []MemoryPoint{}
	}
	s.reply(x.ReplyTo, points)
}

func (s *State) dropSampler(key string) {
	delete(s.samplers, key)
	if len(s.samplers) == 0 {
		s.samplers = nil
	}
}

// dropClientDiagnostics frees the samples of a client that left.
func (s *State) dropClientDiagnostics(client string) {
	for key, ms := range s.samplers {
		if ms.client == client {
			s.dropSampler(key)
		}
	}
}

// MemorySamplers is the number of samples running (for tests and the
// footprint: none costs nothing).
func (s *State) MemorySamplers() int { return len(s.samplers) }
