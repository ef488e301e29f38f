package main

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// snoopRoot is where the platform mounts Secret entries into a run's
// containers (libs/runspec NATSMountDir is under it; a test keeps the two
// together). The mock does not import libs/runspec: it is copied into
// every run pod, and should stay small.
const snoopRoot = "/var/run/agentplane"

// maxSnoop bounds what one attempt prints.
const maxSnoop = 64 << 10

// snoopTargets are the first attempts of the snoop mode, in order, for a
// CLI whose parent (the supervisor) is ppid: the supervisor's environment
// and PID 1's, the supervisor's memory (opened only), and the supervisor's
// stdout, the pod log the controller reads results from (opened for
// writing only; nothing is written). A listing of MOCKAGENT_SNOOP_DIR
// (default snoopRoot) and every file in it follow.
func snoopTargets(ppid int) []snoopTarget {
	pid := strconv.Itoa(ppid)
	return []snoopTarget{
		{path: "/proc/" + pid + "/environ"},
		{path: "/proc/1/environ"},
		{path: "/proc/" + pid + "/mem", openOnly: true},
		{path: "/proc/" + pid + "/fd/1", openOnly: true, write: true},
	}
}

// snoopTarget is one file the snoop mode tries; openOnly opens it without
// reading (reading /proc/<pid>/mem at offset 0 fails even when allowed),
// write opens it for writing.
type snoopTarget struct {
	path            string
	openOnly, write bool
}

// snoop plays the attack of a vendor CLI on the secrets its supervisor
// holds: each attempt is a Read tool call whose result is either the
// error (is_error) or what it got, so whoever reads the run's events sees
// both that the attempt was made and how it ended. The directory walk is
// a Glob call listing every file found, each then read.
func snoop(p *player, e emitter) {
	n := 0
	try := func(t snoopTarget) {
		n++
		id := "snoop_" + strconv.Itoa(n)
		in := map[string]any{"file_path": t.path}
		if t.openOnly {
			in["open_only"] = true
		}
		if t.write {
			in["for_writing"] = true
		}
		p.line(e.toolCall(id, "Read", in))
		out, err := snoopRead(t)
		if err != nil {
			p.line(e.toolResult(id, "Read", in, err.Error(), true))
			return
		}
		p.line(e.toolResult(id, "Read", in, out, false))
	}
	for _, t := range snoopTargets(os.Getppid()) {
		try(t)
	}
	dir := snoopRoot
	if d := os.Getenv("MOCKAGENT_SNOOP_DIR"); d != "" {
		dir = d
	}
	n++
	id := "snoop_" + strconv.Itoa(n)
	in := map[string]any{"pattern": dir + "/**"}
	p.line(e.toolCall(id, "Glob", in))
	files, err := snoopWalk(dir)
	if err != nil {
		p.line(e.toolResult(id, "Glob", in, err.Error(), true))
	} else {
		p.line(e.toolResult(id, "Glob", in, strings.Join(files, "\n"), false))
	}
	for _, f := range files {
		try(snoopTarget{path: f})
	}
}

// snoopRead opens t and returns what it read (NULs, which separate
// environment entries, as newlines), or "opened" for an open-only target.
func snoopRead(t snoopTarget) (string, error) {
	flag := os.O_RDONLY
	if t.write {
		flag = os.O_WRONLY
	}
	f, err := os.OpenFile(t.path, flag, 0)
	if err != nil {
		return "", err
	}
	defer func() { _ = f.Close() }()
	if t.openOnly {
		return "opened " + t.path, nil
	}
	buf := make([]byte, maxSnoop)
	k, err := f.Read(buf)
	if err != nil && k == 0 {
		return "", fmt.Errorf("read %s: %w", t.path, err)
	}
	return strings.ReplaceAll(string(buf[:k]), "\x00", "\n"), nil
}

// snoopWalk lists every file under dir, symlinks to files included (a
// Secret volume's entries are symlinks into a hidden directory, which the
// walk reaches too), or the error that stopped the listing.
func snoopWalk(dir string) ([]string, error) {
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := os.Stat(path); d.IsDir() || err == nil && fi.IsDir() {
			return nil
		}
		files = append(files, path)
		return nil
	})
	return files, err
}
