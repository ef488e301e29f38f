package leader

import "testing"

type fakeCtl struct{ synced, healthy bool }

func (f fakeCtl) Synced() bool  { return f.synced }
func (f fakeCtl) Healthy() bool { return f.healthy }

func TestReadiness(t *testing.T) {
	cases := []struct {
		rule   string
		leader bool
		ctl    Controller
		want   bool
	}{
		{"a standby is ready: healthy and waiting", false, nil, true},
		{"a leader without a running loop is not ready", true, nil, false},
		{"a leader is not ready until its cache synced", true, fakeCtl{synced: false, healthy: true}, false},
		{"a leader whose poll keeps failing is not ready", true, fakeCtl{synced: true, healthy: false}, false},
		{"a synced, healthy leader is ready", true, fakeCtl{synced: true, healthy: true}, true},
	}
	for _, c := range cases {
		t.Run(c.rule, func(t *testing.T) {
			s := &State{}
			s.SetLeader(c.leader)
			s.SetController(c.ctl)
			if ok, why := s.Ready(); ok != c.want || (!ok && why == "") {
				t.Errorf("Ready() = %v %q, want %v with a reason when not ready", ok, why, c.want)
			}
		})
	}
}
