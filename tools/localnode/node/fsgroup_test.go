package node

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestVolumeFilesBelongToTheFSGroup(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown to another group needs root")
	}
	cases := []struct {
		rule  string
		group *int64
		want  uint32
	}{
		{"with an fsGroup the files belong to it, so mode 0440 reads for runAsUser", ptr64(1000), 1000},
		{"without one they keep the node's group", nil, uint32(os.Getegid())},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			dir := t.TempDir()
			mode := int32(0o440)
			if err := writeVolume(dir, []volumeFile{{path: "token", data: []byte("x")}}, &mode, tc.group); err != nil {
				t.Fatal(err)
			}
			fi, err := os.Stat(filepath.Join(dir, "token"))
			if err != nil {
				t.Fatal(err)
			}
			if gid := fi.Sys().(*syscall.Stat_t).Gid; gid != tc.want || fi.Mode().Perm() != 0o440 {
				t.Errorf("gid %d mode %v, want gid %d mode 0440", gid, fi.Mode().Perm(), tc.want)
			}
		})
	}
}

func ptr64(v int64) *int64 { return &v }
