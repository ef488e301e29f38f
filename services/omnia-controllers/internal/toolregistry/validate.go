package toolregistry

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	omniav1 "github.com/agentplane/agentplane/libs/api/omnia/v1alpha1"
)

// Retry defaults, applied before comparing the backoffs.
const (
	defaultInitialBackoff = 100 * time.Millisecond
	defaultMaxBackoff     = 30 * time.Second
)

// ValidateHandler returns the first problem of one handler, or nil. Most of
// these rules are also CEL rules of the CRD; the controller checks them
// again because objects stored before a rule existed are still read.
func ValidateHandler(h *omniav1.HandlerDefinition, catalog PlatformCatalog) error {
	switch h.Type {
	case omniav1.HandlerTypeHTTP:
		if h.HTTPConfig == nil || h.Tool == nil {
			return errors.New("an http handler needs httpConfig and tool")
		}
		if h.HTTPConfig.Endpoint == "" && h.HTTPConfig.URLTemplate == "" {
			return errors.New("httpConfig.endpoint is empty")
		}
		if err := validateBackoff(retryBackoff(h.HTTPConfig.RetryPolicy)); err != nil {
			return fmt.Errorf("httpConfig.retryPolicy: %w", err)
		}
	case omniav1.HandlerTypeGRPC:
		if h.GRPCConfig == nil || h.Tool == nil {
			return errors.New("a grpc handler needs grpcConfig and tool")
		}
		if p := h.GRPCConfig.RetryPolicy; p != nil {
			if err := validateBackoff(&p.RetryBackoff); err != nil {
				return fmt.Errorf("grpcConfig.retryPolicy: %w", err)
			}
		}
	case omniav1.HandlerTypeMCP:
		if err := validateMCP(h.MCPConfig); err != nil {
			return err
		}
	case omniav1.HandlerTypeOpenAPI:
		if h.OpenAPIConfig == nil || h.OpenAPIConfig.SpecURL == "" {
			return errors.New("an openapi handler needs openAPIConfig.specURL")
		}
		if err := validateBackoff(retryBackoff(h.OpenAPIConfig.RetryPolicy)); err != nil {
			return fmt.Errorf("openAPIConfig.retryPolicy: %w", err)
		}
	case omniav1.HandlerTypeClient:
		if h.Tool == nil {
			return errors.New("a client handler needs tool")
		}
	case omniav1.HandlerTypePlatform:
		if _, err := platformTools(h, catalog); err != nil {
			return err
		}
	default:
		return fmt.Errorf("unknown handler type %q", h.Type)
	}
	if a := h.Auth; a != nil {
		switch a.Type {
		case omniav1.ToolAuthBearer, omniav1.ToolAuthBasic:
			if a.SecretRef == nil {
				return fmt.Errorf("auth type %s needs auth.secretRef", a.Type)
			}
		}
	}
	return nil
}

func validateMCP(c *omniav1.MCPConfig) error {
	if c == nil {
		return errors.New("an mcp handler needs mcpConfig")
	}
	switch c.Transport {
	case omniav1.MCPTransportStdio:
		if c.Command == "" {
			return errors.New("mcpConfig.command is required for the stdio transport")
		}
	case omniav1.MCPTransportSSE, omniav1.MCPTransportStreamableHTTP:
		if c.Endpoint == "" {
			return fmt.Errorf("mcpConfig.endpoint is required for the %s transport", c.Transport)
		}
	default:
		return fmt.Errorf("unknown mcpConfig.transport %q", c.Transport)
	}
	if p := c.RetryPolicy; p != nil {
		if err := validateBackoff(&p.RetryBackoff); err != nil {
			return fmt.Errorf("mcpConfig.retryPolicy: %w", err)
		}
	}
	return nil
}

func retryBackoff(p *omniav1.HTTPRetryPolicy) *omniav1.RetryBackoff {
	if p == nil {
		return nil
	}
	return &p.RetryBackoff
}

func validateBackoff(b *omniav1.RetryBackoff) error {
	if b == nil {
		return nil
	}
	if b.BackoffMultiplier != "" {
		m, err := strconv.ParseFloat(b.BackoffMultiplier, 64)
		if err != nil {
			return fmt.Errorf("backoffMultiplier %q is not a number", b.BackoffMultiplier)
		}
		if m < 1.0 {
			return fmt.Errorf("backoffMultiplier %s is below 1.0", b.BackoffMultiplier)
		}
	}
	initial, maxB := defaultInitialBackoff, defaultMaxBackoff
	if b.InitialBackoff != nil {
		initial = b.InitialBackoff.Duration
	}
	if b.MaxBackoff != nil {
		maxB = b.MaxBackoff.Duration
	}
	if maxB < initial {
		return fmt.Errorf("maxBackoff %s is shorter than initialBackoff %s", maxB, initial)
	}
	return nil
}

// platformTools returns the tools a platform handler exposes: the named
// service's list, narrowed to platformConfig.tools when set.
func platformTools(h *omniav1.HandlerDefinition, catalog PlatformCatalog) ([]PlatformTool, error) {
	if h.PlatformConfig == nil {
		return nil, errors.New("a platform handler needs platformConfig")
	}
	all, ok := catalog[h.PlatformConfig.Service]
	if !ok {
		return nil, fmt.Errorf("unknown platform service %q", h.PlatformConfig.Service)
	}
	if len(h.PlatformConfig.Tools) == 0 {
		return all, nil
	}
	byName := map[string]PlatformTool{}
	for _, t := range all {
		byName[t.Name] = t
	}
	out := make([]PlatformTool, 0, len(h.PlatformConfig.Tools))
	for _, n := range h.PlatformConfig.Tools {
		t, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("platform service %q offers no tool %q", h.PlatformConfig.Service, n)
		}
		out = append(out, t)
	}
	return out, nil
}
