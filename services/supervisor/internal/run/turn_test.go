package run

import "testing"

// TestTurnVerdictJudgesLikeAJobRun checks each rule by which a turn counts
// as failed, and the exit code it reports.
func TestTurnVerdictJudgesLikeAJobRun(t *testing.T) {
	tests := []struct {
		name                                 string
		code                                 int
		gotRes, resultErr, stopped, lingered bool
		isError                              bool
		reason                               string
	}{
		{name: "a result and exit 0 succeed", code: 0, gotRes: true},
		{name: "an error result fails", code: 1, gotRes: true, resultErr: true, isError: true, reason: "result-error"},
		{name: "a lingering CLI stopped after a good result succeeded", code: 143, gotRes: true, lingered: true},
		{name: "a turn stopped after its good result succeeded", code: 143, gotRes: true, stopped: true},
		{name: "a turn stopped before its result ended with the session", code: 143, stopped: true, isError: true, reason: "session-ended"},
		{name: "exit 0 without a result fails", code: 0, isError: true, reason: "no-result"},
		{name: "a death by signal fails", code: 137, isError: true, reason: "signal"},
		{name: "a non-zero exit fails", code: 2, isError: true, reason: "exit-code"},
		{name: "a non-zero exit after a good result fails", code: 3, gotRes: true, isError: true, reason: "exit-code"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := turnVerdict(tt.code, tt.gotRes, tt.resultErr, tt.stopped, tt.lingered)
			if out.isError != tt.isError || out.reason != tt.reason || out.exitCode == nil || int(*out.exitCode) != tt.code {
				t.Fatalf("verdict = %+v (exit %v), want error %v reason %q", out, out.exitCode, tt.isError, tt.reason)
			}
		})
	}
}
