// Package benchprofile lets a benchmark profile a service's real binary.
// A service's main imports it for its side effect; only a build with
// -tags benchprofile (the benchmarks' builds) holds any code: with
// AGENTPLANE_PPROF_ADDR and AGENTPLANE_CPU_PROFILE set, GET /profile/start
// and /profile/stop on that address record the CPU profile of exactly the
// measured window into that file, and GET /profile/heap answers the live
// heap's profile after a GC, GET /profile/goroutine its goroutines grouped by
// stack, and GET /profile/memory the runtime's memory classes
// (runtime/metrics) as they stand. Release builds carry none of it.
package benchprofile
