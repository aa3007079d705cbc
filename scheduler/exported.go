package scheduler

// HeartbeatInterval is distributed's heartbeat_interval(n): the period, in
// seconds, that workers are told to heartbeat at when n workers are known.
// The outer ring needs it for the register-worker reply.
func HeartbeatInterval(n int) float64 { return heartbeatInterval(n) }
