package agentruntime

import (
	"os"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv"
)

var env *testenv.Env

// The controller-manager runs so Deployments get ReplicaSets and pods.
func TestMain(m *testing.M) {
	os.Exit(testenv.Run(m, &env, testenv.Options{ControllerManager: true}))
}
