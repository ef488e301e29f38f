package server

import (
	"net/http"

	"github.com/agentplane/agentplane/services/batch-poller/internal/metrics"
)

// HTTPHandler serves /metrics, /healthz (the process is up) and /readyz
// (the API-key cache has synced, so calls can be answered).
func HTTPHandler(m *metrics.Metrics, ready func() bool) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", m.Handler())
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready() {
			http.Error(w, "agent-secrets cache not synced", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok\n"))
	})
	return mux
}
