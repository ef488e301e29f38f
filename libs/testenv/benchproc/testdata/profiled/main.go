// Command profiled serves libs/benchprofile's endpoints (when built with
// -tags benchprofile) and waits to be killed; TestProfiledProcess runs it.
package main

import (
	"time"

	_ "github.com/agentplane/agentplane/libs/benchprofile"
)

func main() { time.Sleep(time.Hour) }
