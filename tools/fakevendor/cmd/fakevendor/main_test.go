package main

import "testing"

func TestRunRejectsBadFlags(t *testing.T) {
	cases := []struct {
		name string
		args []string
	}{
		{"unknown outcome", []string{"-outcome", "maybe"}},
		{"unknown flag", []string{"-nope"}},
		{"unusable address", []string{"-addr", "256.0.0.1:bad"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if err := run(tc.args); err == nil {
				t.Fatal("run succeeded, want an error")
			}
		})
	}
}
