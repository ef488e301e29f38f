package containers

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// loopCutTable is the nftables table a loopCut owns. Only a test holding
// the realtime port's lock (stack.LockRealtimePort) touches it.
const loopCutTable = "agentplane_test_loopcut"

// loopCut cuts one TCP port of the host's loopback off the network: while
// it is on, every packet to or from that port is dropped on arrival, so a
// program listening there (a realtime run pod's session server, on
// localnode's host network) is lost to its peers as behind a pulled
// cable. Nothing is refused or reset: connections open before the cut
// stay open with nobody answering on them, and new ones never complete
// their handshake. The rule lives in an nftables table of its own, so
// no other rule of the host (Docker's) is touched; the test's cleanup
// removes it.
type loopCut struct {
	t    *testing.T
	port int
	on   bool
}

// newLoopCut prepares a cut of port, failing the test when nftables' nft
// is missing (.ci/run installs it). A table left by an earlier run that
// was killed before its cleanup is removed first.
func newLoopCut(t *testing.T, port int) *loopCut {
	t.Helper()
	if _, err := exec.LookPath("nft"); err != nil {
		t.Fatalf("cutting a run pod off needs nftables' nft (apt-get install nftables): %v", err)
	}
	c := &loopCut{t: t, port: port}
	// Declaring the table first makes the delete succeed whether or not
	// one was left behind.
	if err := nft(fmt.Sprintf("table inet %[1]s\ndelete table inet %[1]s\n", loopCutTable)); err != nil {
		t.Fatalf("remove a stale cut: %v", err)
	}
	t.Cleanup(func() {
		if c.on {
			if err := nft("delete table inet " + loopCutTable + "\n"); err != nil {
				t.Errorf("heal the cut of port %d: %v", port, err)
			}
		}
	})
	return c
}

// Cut starts dropping the port's packets. The drop is on the input hook,
// after the packet left its sender: dropping it on output would fail the
// sender's connect at once (EPERM), which no network does.
func (c *loopCut) Cut() {
	c.t.Helper()
	script := fmt.Sprintf(`table inet %[1]s {
	chain input {
		type filter hook input priority -10; policy accept;
		iifname "lo" tcp dport %[2]d drop
		iifname "lo" tcp sport %[2]d drop
	}
}
`, loopCutTable, c.port)
	if err := nft(script); err != nil {
		c.t.Fatalf("cut port %d off: %v", c.port, err)
	}
	c.on = true
}

// Heal stops dropping the port's packets.
func (c *loopCut) Heal() {
	c.t.Helper()
	if err := nft("delete table inet " + loopCutTable + "\n"); err != nil {
		c.t.Fatalf("heal the cut of port %d: %v", c.port, err)
	}
	c.on = false
}

// nft applies an nftables script atomically.
func nft(script string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("nft: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
