package service

import (
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// ParseLevel reads a log level. Only debug, info, warn and error (any case)
// are accepted: a typo in a Deployment must stop the process at start,
// not quietly log at another level.
func ParseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("unknown log level %q: use debug, info, warn or error", s)
}

// NewLogger returns a JSON logger at level, tagged with the service name,
// and makes it the process default: slog's, client-go's (klog) and
// controller-runtime's (logr), so that every line a binary prints has one
// shape.
func NewLogger(service, level string, w io.Writer) (*slog.Logger, error) {
	lvl, err := ParseLevel(level)
	if err != nil {
		return nil, err
	}
	h := slog.NewJSONHandler(w, &slog.HandlerOptions{Level: lvl})
	log := slog.New(h).With("service", service)
	slog.SetDefault(log)
	klog.SetSlogLogger(log.With("source", "client-go"))
	ctrllog.SetLogger(logr.FromSlogHandler(log.Handler()))
	return log, nil
}
