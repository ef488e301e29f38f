package service

import (
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// Set by the Makefile through -ldflags -X; see Version for the fallback.
var (
	version   = ""
	revision  = ""
	buildDate = ""
)

// BuildInfo says which build a binary is.
type BuildInfo struct {
	// Version is the release (the repository's VERSION file), or "dev".
	Version string
	// Revision is the git commit it was built from, or "unknown".
	Revision string
	// BuildDate is the commit time in RFC 3339, or "unknown".
	BuildDate string
	// GoVersion is the Go toolchain that built it.
	GoVersion string
}

// Version returns the build information stamped at link time. A binary
// built without the Makefile (go run, go test) falls back to what the Go
// toolchain recorded: the VCS revision and time when it knows them.
func Version() BuildInfo {
	b := BuildInfo{Version: version, Revision: revision, BuildDate: buildDate, GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch {
			case s.Key == "vcs.revision" && b.Revision == "":
				b.Revision = s.Value
			case s.Key == "vcs.time" && b.BuildDate == "":
				b.BuildDate = s.Value
			}
		}
	}
	if b.Version == "" {
		b.Version = "dev"
	}
	if b.Revision == "" {
		b.Revision = "unknown"
	}
	if b.BuildDate == "" {
		b.BuildDate = "unknown"
	}
	return b
}

// String is what --version prints.
func (b BuildInfo) String(service string) string {
	return fmt.Sprintf("%s version %s (revision %s, built %s, %s)", service, b.Version, b.Revision, b.BuildDate, b.GoVersion)
}

// RegisterBuildInfo adds agentplane_build_info{service,version,revision,goversion},
// always 1, to reg, so dashboards can tell which build each pod runs.
func RegisterBuildInfo(reg prometheus.Registerer, service string) error {
	b := Version()
	g := prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "agentplane_build_info",
		Help: "Always 1; its labels name the service and the build it runs.",
		ConstLabels: prometheus.Labels{
			"service": service, "version": b.Version, "revision": b.Revision, "goversion": b.GoVersion,
		},
	})
	g.Set(1)
	return reg.Register(g)
}
