package main

import (
	"sync"
	"syscall"
	"time"
)

// meter samples this process's CPU and context switches (getrusage) at the
// edges of the measurement window: start at the first message, stop when
// the replay has ended. Safe for concurrent use.
type meter struct {
	mu         sync.Mutex
	started    bool
	begin, end sample
}

type sample struct {
	at           time.Time
	user, sys    time.Duration
	nvcsw, nivcs int64
}

func takeSample() sample {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru) // Linux never fails RUSAGE_SELF
	return sample{at: time.Now(), user: time.Duration(ru.Utime.Nano()), sys: time.Duration(ru.Stime.Nano()),
		nvcsw: ru.Nvcsw, nivcs: ru.Nivcsw}
}

func (m *meter) start() {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		m.started, m.begin = true, takeSample()
	}
}

func (m *meter) stop() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.end = takeSample()
}

// Usage is the window's CPU and context switches.
type Usage struct {
	CPUUserS     float64 `json:"cpu_user_s"`
	CPUSysS      float64 `json:"cpu_sys_s"`
	VoluntaryCtx int64   `json:"voluntary_ctxt_switches"`
	InvolCtx     int64   `json:"nonvoluntary_ctxt_switches"`
	WindowS      float64 `json:"window_s"`
}

func (m *meter) usage() Usage {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.started {
		return Usage{}
	}
	return Usage{
		CPUUserS: (m.end.user - m.begin.user).Seconds(), CPUSysS: (m.end.sys - m.begin.sys).Seconds(),
		VoluntaryCtx: m.end.nvcsw - m.begin.nvcsw, InvolCtx: m.end.nivcs - m.begin.nivcs,
		WindowS: m.end.at.Sub(m.begin.at).Seconds(),
	}
}
