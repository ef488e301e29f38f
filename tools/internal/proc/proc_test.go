package proc

import (
	"os"
	"os/exec"
	"testing"
)

func TestAlive(t *testing.T) {
	self, err := os.ReadFile("/proc/self/cmdline")
	if err != nil {
		t.Skip("no /proc")
	}
	argv0 := string(self[:indexNUL(self)])
	cases := []struct {
		rule string
		pid  int
		bin  string
		want bool
	}{
		{"a running process with the recorded binary is alive", os.Getpid(), argv0, true},
		{"a reused PID running another binary is not ours", os.Getpid(), "/not/the/binary", false},
		{"a PID that does not exist is gone", 1 << 30, argv0, false},
		{"a non-positive PID is gone", 0, argv0, false},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			if got := Alive(c.pid, c.bin); got != c.want {
				t.Errorf("Alive = %v, want %v", got, c.want)
			}
		})
	}
	// A child that exited but was not reaped yet is a zombie: gone.
	cmd := exec.Command("/bin/true")
	if err := cmd.Start(); err != nil {
		t.Skip(err)
	}
	pid := cmd.Process.Pid
	for i := 0; i < 100; i++ {
		stat, _ := os.ReadFile("/proc/" + itoa(pid) + "/stat")
		if len(stat) > 0 && containsZombie(stat) {
			break
		}
		sleep()
	}
	if Alive(pid, "/bin/true") {
		t.Error("a zombie counts as gone")
	}
	_ = cmd.Wait()
}
