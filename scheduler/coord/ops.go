package coord

// Every op type is an Op.
func (*EventWait) coordOp()              {}
func (*EventSet) coordOp()               {}
func (*EventClear) coordOp()             {}
func (*EventIsSet) coordOp()             {}
func (*SetMetadata) coordOp()            {}
func (*GetMetadata) coordOp()            {}
func (*MultiLockAcquire) coordOp()       {}
func (*MultiLockRelease) coordOp()       {}
func (*PublishPut) coordOp()             {}
func (*PublishDelete) coordOp()          {}
func (*PublishFlush) coordOp()           {}
func (*PublishList) coordOp()            {}
func (*PublishGet) coordOp()             {}
func (*QueueCreate) coordOp()            {}
func (*QueueRelease) coordOp()           {}
func (*QueuePut) coordOp()               {}
func (*QueueGet) coordOp()               {}
func (*QueueSize) coordOp()              {}
func (*QueueFutureRelease) coordOp()     {}
func (*SemaphoreRegister) coordOp()      {}
func (*SemaphoreAcquire) coordOp()       {}
func (*SemaphoreRelease) coordOp()       {}
func (*SemaphoreClose) coordOp()         {}
func (*SemaphoreRefreshLeases) coordOp() {}
func (*SemaphoreValue) coordOp()         {}
func (*VariableSet) coordOp()            {}
func (*VariableGet) coordOp()            {}
func (*VariableDelete) coordOp()         {}
func (*VariableFutureReceived) coordOp() {}
func (*CancelWait) coordOp()             {}
