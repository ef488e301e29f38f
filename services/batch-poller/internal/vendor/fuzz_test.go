package vendor

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"google.golang.org/genai"

	"github.com/agentplane/agentplane/libs/vendors"
	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

// checkOutcome holds every outcome to the rules the tracker relies on.
func checkOutcome(t *testing.T, o Outcome) {
	t.Helper()
	if o.State == batchv1.State_STATE_FAILED && o.FailureMessage == "" {
		t.Errorf("failed outcome without a message: %+v", o)
	}
	if o.State == batchv1.State_STATE_SUCCEEDED && len(o.Lines) == 0 {
		t.Errorf("succeeded outcome without lines: %+v", o)
	}
	for _, l := range o.Lines {
		if !json.Valid([]byte(l)) {
			t.Errorf("line is not JSON: %q", l)
		}
	}
}

func FuzzOpenAIResultFile(f *testing.F) {
	f.Add([]byte(`{"id":"batch_req_1","custom_id":"run-u","response":{"status_code":200,"body":{"id":"chatcmpl-1","model":"gpt-5","created":1,"choices":[{"finish_reason":"stop","message":{"content":"hi"}}],"usage":{"prompt_tokens":1,"completion_tokens":2}}},"error":null}` + "\n"))
	f.Add([]byte(`{"custom_id":"run-u","response":{"status_code":400,"body":{"error":{"message":"bad"}}}}`))
	f.Add([]byte(`{"custom_id":"run-u","response":null,"error":{"code":"batch_expired","message":"late"}}`))
	f.Add([]byte("not json\n{\"custom_id\":1}\n\n"))
	f.Add([]byte(`{"custom_id":"x","response":{"status_code":200,"body":{"choices":[]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		l, ok, _ := findOpenAILine(data, Ref{ID: "batch_1", CustomID: "run-u"})
		if !ok {
			return
		}
		o := openaiLineOutcome("completed", Ref{ID: "batch_1", CustomID: "run-u", CLI: vendors.NameCodex}, l)
		if o.State != batchv1.State_STATE_SUCCEEDED && o.State != batchv1.State_STATE_FAILED {
			t.Errorf("state %v for an ended batch", o.State)
		}
		checkOutcome(t, o)
	})
}

func FuzzAnthropicResultLine(f *testing.F) {
	f.Add([]byte(`{"custom_id":"a","result":{"type":"succeeded","message":{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":2}}}}`))
	f.Add([]byte(`{"custom_id":"b","result":{"type":"errored","error":{"type":"error","error":{"type":"invalid_request_error","message":"bad"}}}}`))
	f.Add([]byte(`{"custom_id":"c","result":{"type":"canceled"}}`))
	f.Add([]byte(`{"custom_id":"d","result":{"type":"expired"}}`))
	f.Add([]byte(`{"result":{"type":"succeeded","message":{"content":[{"type":"tool_use"}]}}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r anthropic.MessageBatchIndividualResponse
		if json.Unmarshal(data, &r) != nil {
			return
		}
		o := anthropicResult("ended", Ref{ID: "msgbatch_1", CustomID: "a", CLI: vendors.NameClaude}, &r, time.Unix(0, 0))
		checkOutcome(t, o)
	})
}

func FuzzGeminiBatchJob(f *testing.F) {
	f.Add([]byte(`{"name":"batches/1","state":"JOB_STATE_SUCCEEDED","model":"models/gemini-3","dest":{"inlinedResponses":[{"response":{"candidates":[{"content":{"parts":[{"text":"hi"}]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2}},"metadata":{"key":"run-u"}}]}}`))
	f.Add([]byte(`{"state":"JOB_STATE_SUCCEEDED","dest":{"inlinedResponses":[{"error":{"code":3,"message":"bad"}},null]}}`))
	f.Add([]byte(`{"state":"JOB_STATE_FAILED","error":{"message":"boom"}}`))
	f.Add([]byte(`{"state":"JOB_STATE_RUNNING"}`))
	f.Add([]byte(`{"state":"JOB_STATE_SUCCEEDED","dest":{"inlinedResponses":[{"response":{"candidates":[null,{"content":null}]}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var job genai.BatchJob
		if json.Unmarshal(data, &job) != nil {
			return
		}
		o, err := geminiOutcome(&job, Ref{ID: "batches/1", CustomID: "run-u", CLI: vendors.NameGemini})
		if err != nil {
			if !errors.Is(err, ErrOtherRun) {
				t.Errorf("err = %v, want only ErrOtherRun", err)
			}
			return
		}
		checkOutcome(t, o)
	})
}
