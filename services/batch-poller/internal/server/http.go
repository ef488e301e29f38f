package server

import (
	"errors"

	"github.com/agentplane/agentplane/libs/service"
)

// AddProbes adds batch-poller's readiness condition to h: /readyz passes
// once the API-key cache has synced, since no call can be answered before.
// /healthz has no condition: the process is up.
func AddProbes(h *service.HTTPServer, synced func() bool) {
	h.AddReadyCheck("agent-secrets", func() error {
		if !synced() {
			return errors.New("agent-secrets cache not synced")
		}
		return nil
	})
}
