// Command dashboards writes agentplane's Grafana dashboards (package
// dashboards) as JSON files: every dashboard into -out, and with -helm
// each chart's own into helm/<chart>/files/dashboards, the umbrella chart
// getting all of them. `make generate` runs it:
//
//	go run ./tools/dashboards -out deploy/dashboards -helm helm
//
// The files are the same bytes on every run; stale .json files in the
// directories it writes are removed.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentplane/agentplane/tools/dashboards/dashboards"
)

func main() {
	out := flag.String("out", "deploy/dashboards", "directory to write every dashboard into")
	helm := flag.String("helm", "", "directory of the Helm charts (helm): also write each chart's dashboards into <dir>/<chart>/files/dashboards")
	flag.Parse()
	if err := run(*out, *helm); err != nil {
		fmt.Fprintf(os.Stderr, "dashboards: %v\n", err)
		os.Exit(1)
	}
}

func run(out, helm string) error {
	all, err := dashboards.All()
	if err != nil {
		return err
	}
	// Directory → file name → content.
	dirs := map[string]map[string][]byte{out: {}}
	for _, d := range all {
		js, err := d.JSON()
		if err != nil {
			return err
		}
		dirs[out][d.FileName()] = js
		if helm == "" {
			continue
		}
		for _, c := range d.Charts {
			dir := filepath.Join(helm, c, "files", "dashboards")
			if dirs[dir] == nil {
				dirs[dir] = map[string][]byte{}
			}
			dirs[dir][d.FileName()] = js
		}
	}
	for dir, files := range dirs {
		if err := write(dir, files); err != nil {
			return err
		}
	}
	return nil
}

// write makes dir hold exactly files among its .json files: it writes the
// ones that differ and removes the others.
func write(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	existing, err := filepath.Glob(filepath.Join(dir, "*.json"))
	if err != nil {
		return err
	}
	for _, f := range existing {
		if _, keep := files[filepath.Base(f)]; !keep {
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, content) {
			continue
		}
		if err := os.WriteFile(path, content, 0o644); err != nil {
			return err
		}
	}
	return nil
}
