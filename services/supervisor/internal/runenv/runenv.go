// Package runenv reads the run pod's environment into one typed value
// shared by `supervisor init` and `supervisor run`: the part the
// agent-controller writes, read through libs/runspec (the one place that
// names those variables), plus the realtime session's settings (named by
// libs/realtime).
package runenv

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/runspec"
	eventsv1 "github.com/agentplane/agentplane/proto/agentplane/events/v1"
)

// Env is what the supervisor reads from its environment.
type Env struct {
	// Env is what the controller wrote (runspec.Read), with the
	// supervisor's defaults for what it left out.
	runspec.Env
	// Getenv resolves any variable, including secret-named ones that may
	// contain dashes (never go through a shell for those).
	Getenv func(string) string
	// Realtime sessions: the listen address, the run's token (from the
	// token Secret, never a file) and the idle limit.
	RealtimeAddr, RealtimeToken string
	RealtimeIdle                time.Duration
}

// Read fills an Env from getenv (os.Getenv when nil).
func Read(getenv func(string) string) Env {
	if getenv == nil {
		getenv = os.Getenv
	}
	return Env{
		Env:           runspec.Read(getenv),
		Getenv:        getenv,
		RealtimeAddr:  first(getenv(realtime.EnvAddr), realtime.DefaultAddr),
		RealtimeToken: getenv(realtime.EnvToken),
		RealtimeIdle:  seconds(getenv(realtime.EnvIdleSeconds), realtime.DefaultIdle),
	}
}

// Realtime reports whether the run is a realtime session.
func (e Env) Realtime() bool { return e.Execution == runspec.ExecutionRealtime }

// Identity is the run identity stamped on every event.
func (e Env) Identity() *eventsv1.RunIdentity {
	return &eventsv1.RunIdentity{Namespace: e.Namespace, Agent: e.Agent, Uid: e.UID, Station: e.Station, TaskId: e.TaskID, Pod: e.Pod}
}

// seconds parses a positive whole number of seconds; unset, zero, negative
// or malformed gives def, and huge values are capped at a year.
func seconds(s string, def time.Duration) time.Duration {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n <= 0 {
		return def
	}
	const limit = int64(365 * 24 * time.Hour / time.Second)
	return time.Duration(min(n, limit)) * time.Second
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}
