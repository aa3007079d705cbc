package scheduler

// Stimuli of the diagnostics and operator RPCs: the MemorySampler
// (memsampler.go), get_task_metadata's collections (taskmetadata.go), the
// active memory manager's controls (amm_control.go) and set_resources. Each
// answers its RPC through ReplyTo; an error is a *coord.RemoteException,
// which the caller raises as the Python exception distributed raises.

// MemorySamplerStart is memory_sampler_start (MemorySamplerExtension.start):
// sample Measure (one of MemoryMeasures, checked at the edge) for Client
// under Key, starting with one sample now. The outer ring sends
// MemorySample at the interval the client asked for.
type MemorySamplerStart struct {
	Base
	Key, Client, Measure string
	ReplyTo              int64
}

// MemorySample takes one sample for Key; the reply is false once the
// sample is gone (stopped, or its client left), and the outer ring stops
// sending them.
type MemorySample struct {
	Base
	Key     string
	ReplyTo int64
}

// MemorySamplerStop is memory_sampler_stop: the reply is the samples
// ([]MemoryPoint), or KeyError for a key not sampling.
type MemorySamplerStop struct {
	Base
	Key     string
	ReplyTo int64
}

// StartTaskMetadata is start_task_metadata (CollectTaskMetaDataPlugin):
// collect the final state and metadata of the keys of every graph
// submitted from now on, under Name. The reply is the collection's
// generation (int64).
type StartTaskMetadata struct {
	Base
	Name    string
	ReplyTo int64
}

// StopTaskMetadata is stop_task_metadata: the reply is {"metadata":
// {key: metadata}, "state": {key: state}}, or ValueError for a name not
// collecting. CallerGone frees the collection of generation Gen (the
// reply to StartTaskMetadata) without a reply: the connection that started
// it closed (its client left).
type StopTaskMetadata struct {
	Base
	Name       string
	CallerGone bool
	Gen        int64
	ReplyTo    int64
}

// AMMControl is amm_handler: Method is "start", "stop", "running" (the
// reply is a bool) or "run_once".
type AMMControl struct {
	Base
	Method  string
	ReplyTo int64
}

// SetResources is set_resources (Scheduler.add_resources, which
// Worker.set_resources calls): the worker's resources become Resources
// merged over the ones it had.
type SetResources struct {
	Base
	Worker    string
	Resources map[string]float64
	ReplyTo   int64
}

// ReplyID implements the outer ring's reply lookup.
func (x *MemorySamplerStart) ReplyID() int64 { return x.ReplyTo }

// ReplyID implements the outer ring's reply lookup.
func (x *MemorySample) ReplyID() int64 { return x.ReplyTo }

// ReplyID implements the outer ring's reply lookup.
func (x *MemorySamplerStop) ReplyID() int64 { return x.ReplyTo }

// ReplyID implements the outer ring's reply lookup.
func (x *StartTaskMetadata) ReplyID() int64 { return x.ReplyTo }

// ReplyID implements the outer ring's reply lookup.
func (x *StopTaskMetadata) ReplyID() int64 { return x.ReplyTo }

// ReplyID implements the outer ring's reply lookup.
func (x *AMMControl) ReplyID() int64 { return x.ReplyTo }

// ReplyID implements the outer ring's reply lookup.
func (x *SetResources) ReplyID() int64 { return x.ReplyTo }

func (s *State) dispatchDiagnostics(st Stimulus) {
	switch x := st.(type) {
	case *MemorySamplerStart:
		s.startMemorySampler(x)
	case *MemorySample:
		s.reply(x.ReplyTo, s.memorySample(x.Key))
	case *MemorySamplerStop:
		s.stopMemorySampler(x)
	case *StartTaskMetadata:
		s.startTaskMetadata(x)
	case *StopTaskMetadata:
		s.stopTaskMetadata(x)
	case *AMMControl:
		s.sid("amm-handler")
		s.handleAMMControl(x)
	case *SetResources:
		s.sid("set-resources")
		s.handleSetResources(x)
	}
}
