package skillsource

import (
	"flag"
	"os"
	"testing"

	"github.com/agentplane/agentplane/libs/testenv"
)

var env *testenv.Env

// TestMain starts a control plane for the envtest tests. A fuzz worker
// process runs only FuzzParseDocument, which needs none, and is restarted
// often; starting a control plane in each would leave the fuzzer waiting
// on etcd rather than on the parser.
func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	os.Exit(testenv.Run(m, &env, testenv.Options{}))
}
