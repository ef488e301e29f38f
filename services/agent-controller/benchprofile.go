//go:build benchprofile

package main

import (
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
)

// Built only with -tags benchprofile, by the benchmark
// (internal/bench): with AGENTPLANE_PPROF_ADDR and AGENTPLANE_CPU_PROFILE
// set, GET /profile/start and /profile/stop on that address record the CPU
// profile of exactly the measured window into that file, and GET
// /profile/heap answers the live heap's profile.
func init() {
	addr, path := os.Getenv("AGENTPLANE_PPROF_ADDR"), os.Getenv("AGENTPLANE_CPU_PROFILE")
	if addr == "" || path == "" {
		return
	}
	var mu sync.Mutex
	var f *os.File
	mux := http.NewServeMux()
	mux.HandleFunc("/profile/start", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		var err error
		if f, err = os.Create(path); err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	mux.HandleFunc("/profile/stop", func(w http.ResponseWriter, _ *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		pprof.StopCPUProfile()
		if f != nil {
			_ = f.Close()
		}
	})
	// The live heap after a GC, for the benchmark to take where memory
	// peaks.
	mux.HandleFunc("/profile/heap", func(w http.ResponseWriter, _ *http.Request) {
		runtime.GC()
		if err := pprof.Lookup("heap").WriteTo(w, 0); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	go func() { _ = http.ListenAndServe(addr, mux) }() //nolint:gosec // loopback, benchmark builds only
}
