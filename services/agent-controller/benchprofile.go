//go:build benchprofile

package main

import (
	"net/http"
	"os"
	"runtime/pprof"
	"sync"
)

// Built only with -tags benchprofile, by the benchmark
// (internal/bench): with AGENTPLANE_PPROF_ADDR and AGENTPLANE_CPU_PROFILE
// set, GET /profile/start and /profile/stop on that address record the CPU
// profile of exactly the measured window into that file.
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
	go func() { _ = http.ListenAndServe(addr, mux) }() //nolint:gosec // loopback, benchmark builds only
}
