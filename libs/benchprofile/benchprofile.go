//go:build benchprofile

package benchprofile

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"strings"
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
	// Every goroutine's stack, grouped (debug=1), for what holds them.
	mux.HandleFunc("/profile/goroutine", func(w http.ResponseWriter, _ *http.Request) {
		if err := pprof.Lookup("goroutine").WriteTo(w, 1); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		}
	})
	// Where the process's memory is now, by the runtime's own classes,
	// without a GC: what a resident-set figure is made of.
	mux.HandleFunc("/profile/memory", func(w http.ResponseWriter, _ *http.Request) {
		writeMemoryClasses(w)
	})
	go func() { _ = http.ListenAndServe(addr, mux) }() //nolint:gosec // loopback, benchmark builds only
}

// writeMemoryClasses writes each of the runtime's /memory/classes/ metrics,
// the heap goal and the number of goroutines (whose stacks are a class) as
// "name value" lines.
func writeMemoryClasses(w io.Writer) {
	var samples []metrics.Sample
	for _, d := range metrics.All() {
		if strings.HasPrefix(d.Name, "/memory/classes/") || d.Name == "/gc/heap/goal:bytes" || d.Name == "/sched/goroutines:goroutines" {
			samples = append(samples, metrics.Sample{Name: d.Name})
		}
	}
	metrics.Read(samples)
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			_, _ = fmt.Fprintf(w, "%s %d\n", s.Name, s.Value.Uint64())
		}
	}
}
