package ctxtime

import (
	"context"
	"testing"
	"time"
)

func TestSleep(t *testing.T) {
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	cases := []struct {
		rule string
		ctx  context.Context
		d    time.Duration
		want bool
	}{
		{"a full wait reports true", context.Background(), time.Millisecond, true},
		{"no wait on a live context reports true", context.Background(), 0, true},
		{"an ended context cuts the wait short", ended, time.Hour, false},
		{"no wait on an ended context reports false", ended, 0, false},
	}
	for _, tc := range cases {
		t.Run(tc.rule, func(t *testing.T) {
			if got := Sleep(tc.ctx, tc.d); got != tc.want {
				t.Fatalf("Sleep = %v, want %v", got, tc.want)
			}
		})
	}
}
