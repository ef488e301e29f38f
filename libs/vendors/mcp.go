package vendors

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"

	agentsv1alpha1 "github.com/agentplane/agentplane/libs/api/agents/v1alpha1"
)

// MCPHeaderEnvName is the environment variable that carries an MCP server's
// Authorization header value: headers_secret upper-cased, every character
// but letters and digits turned into "_" (lore-mcp-auth → LORE_MCP_AUTH).
// Config files name the variable, never the value, and shells can read it.
func MCPHeaderEnvName(headersSecret string) string {
	b := []byte(strings.ToUpper(headersSecret))
	for i, c := range b {
		if (c < 'A' || c > 'Z') && (c < '0' || c > '9') {
			b[i] = '_'
		}
	}
	return string(b)
}

// marshalJSON encodes without HTML escaping, so URLs keep their "&" and
// the output reads like what a person would write.
func marshalJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(buf.Bytes(), "\n"), nil
}

// claudeMCPServer is one entry of Claude's --mcp-config mcpServers.
type claudeMCPServer struct {
	Type    string            `json:"type"`
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	URL     string            `json:"url,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

// claudeMCPConfig renders the --mcp-config JSON. Claude expands ${NAME} in
// headers from its environment.
func claudeMCPConfig(servers []agentsv1alpha1.MCPServer) (string, error) {
	m := make(map[string]claudeMCPServer, len(servers))
	for _, s := range servers {
		e := claudeMCPServer{Type: string(s.Transport)}
		if s.Transport == agentsv1alpha1.MCPTransportStdio {
			e.Command, e.Args = s.Command, s.Args
		} else {
			e.URL = s.URL
			if s.HeadersSecret != "" {
				e.Headers = map[string]string{"Authorization": "${" + MCPHeaderEnvName(s.HeadersSecret) + "}"}
			}
		}
		m[s.Name] = e
	}
	b, err := marshalJSON(map[string]any{"mcpServers": m})
	if err != nil {
		return "", fmt.Errorf("rendering claude MCP config: %w", err)
	}
	return string(b), nil
}

// geminiMCPServer is one entry of Gemini's settings.json mcpServers: url is
// the SSE endpoint and httpUrl the streamable HTTP one.
type geminiMCPServer struct {
	Command string            `json:"command,omitempty"`
	Args    []string          `json:"args,omitempty"`
	URL     string            `json:"url,omitempty"`
	HTTPURL string            `json:"httpUrl,omitempty"`
	Headers map[string]string `json:"headers,omitempty"`
}

func geminiMCPServers(servers []agentsv1alpha1.MCPServer) map[string]geminiMCPServer {
	m := make(map[string]geminiMCPServer, len(servers))
	for _, s := range servers {
		var e geminiMCPServer
		switch s.Transport {
		case agentsv1alpha1.MCPTransportStdio:
			e.Command, e.Args = s.Command, s.Args
		case agentsv1alpha1.MCPTransportSSE:
			e.URL = s.URL
		default:
			e.HTTPURL = s.URL
		}
		if s.Transport != agentsv1alpha1.MCPTransportStdio && s.HeadersSecret != "" {
			e.Headers = map[string]string{"Authorization": "${" + MCPHeaderEnvName(s.HeadersSecret) + "}"}
		}
		m[s.Name] = e
	}
	return m
}

// openCodeMCPServer is one entry of OpenCode's opencode.json mcp: local
// servers take the program and its arguments as one list.
type openCodeMCPServer struct {
	Type    string            `json:"type"`
	Command []string          `json:"command,omitempty"`
	URL     string            `json:"url,omitempty"`
	Enabled bool              `json:"enabled"`
	Headers map[string]string `json:"headers,omitempty"`
}

func openCodeMCPServers(servers []agentsv1alpha1.MCPServer) map[string]openCodeMCPServer {
	m := make(map[string]openCodeMCPServer, len(servers))
	for _, s := range servers {
		e := openCodeMCPServer{Enabled: true}
		if s.Transport == agentsv1alpha1.MCPTransportStdio {
			e.Type = "local"
			e.Command = append([]string{s.Command}, s.Args...)
		} else {
			e.Type, e.URL = "remote", s.URL
			if s.HeadersSecret != "" {
				e.Headers = map[string]string{"Authorization": "{env:" + MCPHeaderEnvName(s.HeadersSecret) + "}"}
			}
		}
		m[s.Name] = e
	}
	return m
}

// codexMCPConfig renders Codex's config.toml mcp_servers tables. Codex
// speaks stdio and streamable HTTP only, so an sse server is an error
// rather than a server silently left out.
func codexMCPConfig(servers []agentsv1alpha1.MCPServer) ([]byte, error) {
	var b strings.Builder
	b.WriteString("# Written for this run by agentplane: the recipe's MCP servers.\n")
	for _, s := range servers {
		fmt.Fprintf(&b, "\n[mcp_servers.%s]\n", tomlString(s.Name))
		switch s.Transport {
		case agentsv1alpha1.MCPTransportStdio:
			fmt.Fprintf(&b, "command = %s\n", tomlString(s.Command))
			if len(s.Args) > 0 {
				b.WriteString("args = [")
				for i, a := range s.Args {
					if i > 0 {
						b.WriteString(", ")
					}
					b.WriteString(tomlString(a))
				}
				b.WriteString("]\n")
			}
		case agentsv1alpha1.MCPTransportHTTP:
			fmt.Fprintf(&b, "url = %s\n", tomlString(s.URL))
			if s.HeadersSecret != "" {
				// The header's value is read from this environment variable.
				fmt.Fprintf(&b, "env_http_headers = { \"Authorization\" = %s }\n",
					tomlString(MCPHeaderEnvName(s.HeadersSecret)))
			}
		default:
			return nil, fmt.Errorf("codex cannot use MCP server %q: transport %q is not supported (use stdio or http)",
				s.Name, s.Transport)
		}
	}
	return []byte(b.String()), nil
}

// tomlString quotes s as a TOML basic string.
func tomlString(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\t':
			b.WriteString(`\t`)
		case '\r':
			b.WriteString(`\r`)
		default:
			if r < 0x20 || r == 0x7f {
				fmt.Fprintf(&b, `\u%04X`, r)
			} else {
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}
