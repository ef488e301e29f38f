package toolregistry

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// PlatformTool is one tool a platform service offers.
type PlatformTool struct {
	// Name is the tool name the model sees.
	Name string
	// Description tells the model what the tool does.
	Description string
	// InputSchema is the JSON Schema of the arguments.
	InputSchema string
}

// PlatformCatalog maps a platform service name to its tools, in the order
// they are listed in discoveredTools.
type PlatformCatalog map[string][]PlatformTool

// DefaultPlatformCatalog is the tool list of each agentplane platform
// service a platform handler can name. It lives in the controller because
// discovery reads the spec, not the cluster: the controller must know each
// service's tools without calling it.
var DefaultPlatformCatalog = PlatformCatalog{
	"agents": {
		{Name: "start_agent_run", Description: "Start a run of an Agent with a prompt and return the run's id.",
			InputSchema: `{"type":"object","required":["agent","prompt"],"properties":{"agent":{"type":"string"},"prompt":{"type":"string"}}}`},
		{Name: "get_agent_run", Description: "Return the phase and output of an Agent run.",
			InputSchema: `{"type":"object","required":["agent"],"properties":{"agent":{"type":"string"}}}`},
		{Name: "list_agents", Description: "List the Agents of the namespace with their phase.",
			InputSchema: `{"type":"object","properties":{}}`},
		{Name: "cancel_agent_run", Description: "Cancel a running Agent run.",
			InputSchema: `{"type":"object","required":["agent"],"properties":{"agent":{"type":"string"}}}`},
	},
}

func rawJSON(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
