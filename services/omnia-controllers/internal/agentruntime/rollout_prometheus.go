package agentruntime

import (
	"context"
	"errors"
	"fmt"
	"time"

	promapi "github.com/prometheus/client_golang/api"
	promv1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"
)

// MetricsQuerier runs the instant queries of rollout analysis steps. The
// Reconciler takes it as an interface so tests can point it at their own
// server.
type MetricsQuerier interface {
	// Query evaluates an instant PromQL query now and returns its values:
	// every sample of a vector, in the order Prometheus returned them, or
	// the one value of a scalar.
	Query(ctx context.Context, query string) ([]float64, error)
}

// queryTimeout bounds one analysis query, so a slow Prometheus holds a
// reconcile worker for seconds, not minutes.
const queryTimeout = 10 * time.Second

type prometheusQuerier struct {
	api promv1.API
}

// NewPrometheusQuerier returns a MetricsQuerier for the Prometheus HTTP API
// at address, such as http://prometheus.monitoring.svc:9090.
func NewPrometheusQuerier(address string) (MetricsQuerier, error) {
	c, err := promapi.NewClient(promapi.Config{Address: address})
	if err != nil {
		// Not wrapped: the parse error repeats the address, which may
		// carry credentials.
		return nil, errors.New("prometheus client: the address is not a valid URL")
	}
	return &prometheusQuerier{api: promv1.NewAPI(c)}, nil
}

func (p *prometheusQuerier) Query(ctx context.Context, query string) ([]float64, error) {
	ctx, cancel := context.WithTimeout(ctx, queryTimeout)
	defer cancel()
	// A zero time lets Prometheus evaluate at its own "now".
	v, _, _, err := p.api.Query(ctx, query, time.Time{})
	if err != nil {
		return nil, fmt.Errorf("prometheus query: %w", err)
	}
	switch v := v.(type) {
	case model.Vector:
		out := make([]float64, len(v))
		for i, s := range v {
			out[i] = float64(s.Value)
		}
		return out, nil
	case *model.Scalar:
		return []float64{float64(v.Value)}, nil
	case nil:
		return nil, fmt.Errorf("prometheus query returned no result")
	}
	return nil, fmt.Errorf("prometheus query returned a %s; an analysis needs a vector or a scalar", v.Type())
}
