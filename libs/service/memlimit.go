package service

import (
	"log/slog"
	"os"
	"runtime/debug"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// MemoryLimitRatio is the share of the container's memory limit the Go
// runtime's soft limit is set to: the rest is for what the runtime does
// not count (stacks aside, the binary, kernel buffers) and for the time
// the collector needs to catch up.
const MemoryLimitRatio = 0.9

// LimitMemory sets the Go runtime's soft memory limit (GOMEMLIMIT) to
// MemoryLimitRatio of the container's memory limit, read from its cgroup,
// and returns the limit in force. Near it the garbage collector runs more
// often instead of the heap growing to twice its live size and the kernel
// killing the process at the container's limit. GOMEMLIMIT in the
// environment wins, AUTOMEMLIMIT=off turns this off (AUTOMEMLIMIT=0.8
// sets another ratio), and outside a memory-limited cgroup nothing
// changes. See docs/configuration.md.
func LimitMemory(log *slog.Logger) int64 {
	return limitMemory(log, memlimit.FromCgroup)
}

// limitMemory is LimitMemory with the limit read from provider.
func limitMemory(log *slog.Logger, provider memlimit.Provider) int64 {
	limit, _ := memlimit.Set(memlimit.WithRatio(MemoryLimitRatio), memlimit.WithProvider(provider), memlimit.WithLogger(log))
	return limit
}

// DefaultGCPercent sets the garbage collector's target (GOGC: how far the
// heap grows past the live heap, in percent of it, before a collection
// starts) to percent, unless GOGC in the environment has set it. Go's
// default, 100, lets the heap reach twice its live size between
// collections; a process whose live heap is small and allocation rate low
// keeps its resident set nearer its live heap with a lower target, for a
// little collector CPU. See docs/configuration.md.
func DefaultGCPercent(percent int) {
	if os.Getenv("GOGC") != "" {
		return
	}
	debug.SetGCPercent(percent)
}
