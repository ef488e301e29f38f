// Package validate checks PromptService requests before anything else
// looks at them, so a bad request is refused with InvalidArgument naming
// the field and never reaches the Kubernetes API or a run pod.
package validate

import (
	"fmt"
	"strings"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/agentplane/agentplane/libs/realtime"
	"github.com/agentplane/agentplane/libs/truncate"
	realtimev1 "github.com/agentplane/agentplane/proto/agentplane/realtime/v1"
)

// Agent checks the Agent reference: both names must be valid Kubernetes
// names (a namespace is a DNS label, an Agent a DNS subdomain).
func Agent(ref *realtimev1.AgentRef) error {
	if ref == nil {
		return invalid("agent", "is required")
	}
	if msgs := validation.IsDNS1123Label(ref.GetNamespace()); len(msgs) > 0 {
		return invalid("agent.namespace", fmt.Sprintf("%q is not a valid namespace: %s", truncate.String(ref.GetNamespace(), maxEcho), strings.Join(msgs, "; ")))
	}
	if msgs := validation.IsDNS1123Subdomain(ref.GetName()); len(msgs) > 0 {
		return invalid("agent.name", fmt.Sprintf("%q is not a valid Agent name: %s", truncate.String(ref.GetName(), maxEcho), strings.Join(msgs, "; ")))
	}
	return nil
}

// Text checks a prompt's text against what the run pod can pass to the
// CLI as one argument.
func Text(text string) error {
	switch {
	case text == "":
		return invalid("text", "is empty")
	case len(text) > realtime.MaxPromptBytes:
		return invalid("text", fmt.Sprintf("is %d bytes, at most %d", len(text), realtime.MaxPromptBytes))
	case !utf8.ValidString(text):
		return invalid("text", "is not valid UTF-8")
	case strings.IndexByte(text, 0) >= 0:
		return invalid("text", "contains a NUL byte")
	}
	return nil
}

// Prompt checks a PromptRequest.
func Prompt(req *realtimev1.PromptRequest) error {
	if err := Agent(req.GetAgent()); err != nil {
		return err
	}
	return Text(req.GetText())
}

func invalid(field, why string) error {
	return status.Errorf(codes.InvalidArgument, "%s %s", field, why)
}

// maxEcho bounds a bad value echoed in an error; the caller sent all of
// it anyway.
const maxEcho = 80
