// Package proc answers questions about local processes that the tools
// start detached and find again later through a recorded PID.
package proc

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// Alive reports whether pid runs and its argv[0] is bin, so a PID the
// kernel reused for another program is never taken for ours (and never
// signalled). A zombie counts as gone.
func Alive(pid int, bin string) bool {
	if pid <= 0 {
		return false
	}
	dir := filepath.Join("/proc", strconv.Itoa(pid))
	raw, err := os.ReadFile(filepath.Join(dir, "cmdline"))
	if err != nil {
		return false
	}
	if argv0, _, _ := strings.Cut(string(raw), "\x00"); argv0 != bin {
		return false
	}
	stat, err := os.ReadFile(filepath.Join(dir, "stat"))
	if err != nil {
		return false
	}
	// The state letter follows the ")" that closes the command name.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
