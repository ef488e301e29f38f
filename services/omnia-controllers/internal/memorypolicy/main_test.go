package memorypolicy

import (
	"os"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { os.Exit(testenv.Run(m, &env, testenv.Options{})) }
