package scheduler

// coTransferWeight: with co-assignment, workerObjective counts a missing
// dependency at this many times its transfer time. Co-assignment places
// the roots; their consumers (combines, a stencil's overlap tasks) are
// placed by distributed's worker_objective, the worker that can start
// soonest, a missing dependency priced at its transfer time (100 MB/s
// until workers report). A 1 MiB chunk then moves as soon as its owner is
// 10 ms busier than a neighbour holding a 3 KB halo, which on a mesh is
// most of the time. That price leaves out what a transfer really costs
// here: the sender and the receiver both hold the data until the sender's
// copy is released, and both spend CPU on (de)serialization, as much as
// the task itself for a light one. Measured on the benchmark (4 workers, 1
// thread, scale 0.5, one run each): bytes moved with co-assignment went
// from 109 to 7 MiB on map-overlap, 5.5 to 1.9 GiB on climactic-mean and
// 2.9 to 2.0 GiB on anom-mean, and peak memory from 1.04× to 0.94×
// withholding's on climactic-mean. Work stealing keeps distributed's own
// cost model.
const coTransferWeight = 10.0
