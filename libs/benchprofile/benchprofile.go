//go:build benchprofile

package benchprofile

import (
	"net/http"
	"os"
	"runtime"
	"runtime/pprof"
	"sync"
)

// init serves the profiles when the benchmark asks for them (see the
// package documentation).
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
