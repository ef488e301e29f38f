package controller

import (
	"math"
	"testing"
	"time"
)

// TestCleanupBackoffDoublesUpToAMinute checks the wait after each failed
// batch cleanup: the base, doubled per earlier failure, held at the cap.
func TestCleanupBackoffDoublesUpToAMinute(t *testing.T) {
	s := time.Second
	tests := []struct {
		name string
		base time.Duration
		want []time.Duration // after failed attempts 1, 2, ...
	}{
		{"the default doubles from a second", s, []time.Duration{s, 2 * s, 4 * s, 8 * s, 16 * s, 32 * s, time.Minute, time.Minute}},
		{"a base that does not divide the cap stops at the cap", 25 * s, []time.Duration{25 * s, 50 * s, time.Minute, time.Minute}},
		{"a base over the cap is capped from the first wait", 2 * time.Minute, []time.Duration{time.Minute, time.Minute}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for i, want := range tt.want {
				if got := cleanupDelay(tt.base, int32(i+1)); got != want {
					t.Errorf("wait after attempt %d = %v, want %v", i+1, got, want)
				}
			}
			if got := cleanupDelay(tt.base, math.MaxInt32); got != time.Minute {
				t.Errorf("wait after attempt 2^31-1 = %v, want the cap", got)
			}
		})
	}
}
