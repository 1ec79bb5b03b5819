// Package cthread runs long native work on a thread of its own, outside
// the Go scheduler, while the calling goroutine waits in the network
// poller.
//
// Why: a cgo call holds its P in a system call for as long as it runs.
// While it does and another P is idle, the runtime's sysmon thread wakes
// every 20 µs to see whether to take the P back, and every cgo call that
// starts wakes it out of its deep sleep to begin that again. ONNX Runtime's
// and ggml's worker threads spin on every core they have during a run; on
// a two-core box each of those wakes preempts one of them, and every
// parallel step then waits for the preempted thread. Measured on the
// bge-small shape with two threads: about 15 wakes per embedding and a
// millisecond of 6 lost. With the work on a C thread and the goroutine
// parked on a pipe, every P is idle and sysmon sleeps through the run.
//
// It is a leaf: cgo and nothing else of the agent's.
package cthread
