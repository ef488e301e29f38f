package initstep

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/vendors"
	"github.com/agentplane/agentplane/services/supervisor/internal/conversation"
)

// TestSavedConversationRestores: what `supervisor run` saves is what the
// conversation step restores, for every vendor with a state dir: the same
// files with the same content, modes and mtimes, and nothing from outside
// the state dir.
func TestSavedConversationRestores(t *testing.T) {
	for _, name := range []string{vendors.NameClaude, vendors.NameCodex, vendors.NameGemini, vendors.NameOpenCode} {
		t.Run(name, func(t *testing.T) {
			v, _ := vendors.ByName(name)
			state := v.StateDir()
			from, to := t.TempDir(), t.TempDir()
			files := map[string]os.FileMode{
				state + "/a/session-1.jsonl": 0o600,
				state + "/a/b/deep.json":     0o644,
				state + "/top.json":          0o640,
			}
			mtime := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
			for rel, mode := range files {
				p := filepath.Join(from, filepath.FromSlash(rel))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte("content of "+rel), mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chtimes(p, mtime, mtime); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(filepath.Join(from, ".bashrc"), []byte("outside"), 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(from, ".bashrc"), filepath.Join(from, filepath.FromSlash(state), "link")); err != nil {
				t.Fatal(err)
			}

			var archive bytes.Buffer
			if err := conversation.Pack(context.Background(), &archive, from, state); err != nil {
				t.Fatal(err)
			}
			if err := extract(&archive, to, state); err != nil {
				t.Fatalf("the init step refuses the saved archive: %v", err)
			}

			var restored []string
			err := filepath.WalkDir(to, func(p string, d os.DirEntry, err error) error {
				if err != nil || d.IsDir() {
					return err
				}
				rel, _ := filepath.Rel(to, p)
				restored = append(restored, filepath.ToSlash(rel))
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if len(restored) != len(files) {
				t.Fatalf("restored %q, want exactly %d files of the state dir", restored, len(files))
			}
			for rel, mode := range files {
				p := filepath.Join(to, filepath.FromSlash(rel))
				b, err := os.ReadFile(p)
				if err != nil || string(b) != "content of "+rel {
					t.Fatalf("%s restored as %q, %v", rel, b, err)
				}
				fi, _ := os.Stat(p)
				if fi.Mode().Perm() != mode || !fi.ModTime().Equal(mtime) {
					t.Fatalf("%s restored with mode %o, mtime %v; want %o, %v", rel, fi.Mode().Perm(), fi.ModTime(), mode, mtime)
				}
			}
		})
	}
}
