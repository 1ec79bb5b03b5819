// Package cthread runs long native work on a thread of its own, outside
// the Go scheduler, while the calling goroutine waits in the network
// poller.
//
// Why: a cgo call holds its P in a system call for as long as it runs.
// While it does and another P is idle, the runtime's sysmon thread keeps
// polling to see whether to take the P back: every 20 µs for the first
// millisecond, then backing off to every 10 ms; and every cgo call that
// starts while sysmon sleeps wakes it to begin again. ONNX Runtime's and
// ggml's worker threads spin on every core they have during a run; on a
// two-core box each of those wakes preempts one of them, and every
// parallel step then waits for the preempted thread. Measured on the
// bge-small shape with two threads: about 20 sysmon wakes per embedding in
// a cgo call and 5 with the run here (the cgo calls around the run still
// wake it), and about a millisecond of 6 saved. With the work on a C
// thread and the goroutine parked on a pipe, every P is idle during the
// run and sysmon sleeps.
//
// It is a leaf: cgo and nothing else of the agent's.
package cthread
