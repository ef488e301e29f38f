package server

import (
	"strings"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	batchv1 "github.com/agentplane/agentplane/proto/agentplane/batch/v1"
)

func TestRequestsAreValidated(t *testing.T) {
	s := startStack(t, map[string]string{"ANTHROPIC_API_KEY": goodKey})
	ctx := t.Context()
	run := s.run("u1")
	ref := func(mut func(*batchv1.BatchRef)) *batchv1.BatchRef {
		r := &batchv1.BatchRef{Run: s.run("u1"), Provider: batchv1.Provider_PROVIDER_ANTHROPIC, BatchId: "msgbatch_x", Model: "claude-opus-5-5"}
		mut(r)
		return r
	}
	cases := []struct {
		name  string
		call  func() error
		field string
	}{
		{"submit without run names run", func() error {
			_, err := s.client.Submit(ctx, &batchv1.SubmitRequest{Model: "claude-opus-5-5", Prompt: "p", MaxTokens: 5})
			return err
		}, "run"},
		{"submit without namespace names run.namespace", func() error {
			_, err := s.client.Submit(ctx, &batchv1.SubmitRequest{Run: &batchv1.Run{Agent: "a", Uid: "u"}, Model: "claude-opus-5-5", Prompt: "p", MaxTokens: 5})
			return err
		}, "run.namespace"},
		{"submit without uid names run.uid", func() error {
			_, err := s.client.Submit(ctx, &batchv1.SubmitRequest{Run: &batchv1.Run{Namespace: "n", Agent: "a"}, Model: "claude-opus-5-5", Prompt: "p", MaxTokens: 5})
			return err
		}, "run.uid"},
		{"submit without model names model", func() error {
			_, err := s.client.Submit(ctx, &batchv1.SubmitRequest{Run: run, Prompt: "p", MaxTokens: 5})
			return err
		}, "model"},
		{"submit without prompt names prompt", func() error {
			_, err := s.client.Submit(ctx, &batchv1.SubmitRequest{Run: run, Model: "claude-opus-5-5", MaxTokens: 5})
			return err
		}, "prompt"},
		{"submit without max_tokens names max_tokens", func() error {
			_, err := s.client.Submit(ctx, &batchv1.SubmitRequest{Run: run, Model: "claude-opus-5-5", Prompt: "p"})
			return err
		}, "max_tokens"},
		{"submit of an exec model is refused", func() error {
			_, err := s.client.Submit(ctx, &batchv1.SubmitRequest{Run: run, Model: "exec", Prompt: "p", MaxTokens: 5})
			return err
		}, "no batch API"},
		{"submit of an opencode model is refused", func() error {
			_, err := s.client.Submit(ctx, &batchv1.SubmitRequest{Run: run, Model: "opencode/anthropic/claude", Prompt: "p", MaxTokens: 5})
			return err
		}, "no batch API"},
		{"get without batch names batch", func() error {
			_, err := s.client.Get(ctx, &batchv1.GetRequest{})
			return err
		}, "batch"},
		{"get without batch id names batch.batch_id", func() error {
			_, err := s.client.Get(ctx, &batchv1.GetRequest{Batch: ref(func(r *batchv1.BatchRef) { r.BatchId = "" })})
			return err
		}, "batch.batch_id"},
		{"get without provider names batch.provider", func() error {
			_, err := s.client.Get(ctx, &batchv1.GetRequest{Batch: ref(func(r *batchv1.BatchRef) { r.Provider = 0 })})
			return err
		}, "batch.provider"},
		{"cancel without uid names batch.run.uid", func() error {
			_, err := s.client.Cancel(ctx, &batchv1.CancelRequest{Batch: ref(func(r *batchv1.BatchRef) { r.Run.Uid = "" })})
			return err
		}, "batch.run.uid"},
		{"delete without namespace names batch.run.namespace", func() error {
			_, err := s.client.Delete(ctx, &batchv1.DeleteRequest{Batch: ref(func(r *batchv1.BatchRef) { r.Run.Namespace = "" })})
			return err
		}, "batch.run.namespace"},
		{"get of an exec model is refused", func() error {
			_, err := s.client.Get(ctx, &batchv1.GetRequest{Batch: ref(func(r *batchv1.BatchRef) { r.Model = "exec" })})
			return err
		}, "batch.model"},
		{"get with a model of another provider is refused", func() error {
			_, err := s.client.Get(ctx, &batchv1.GetRequest{Batch: ref(func(r *batchv1.BatchRef) { r.Model = "gpt-5" })})
			return err
		}, "batch.model"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
				t.Errorf("err = %v, want InvalidArgument naming %q", err, tc.field)
			}
		})
	}
	if n := len(s.fv.AllCalls()); n != 0 {
		t.Errorf("invalid requests reached the vendor: %v", s.fv.AllCalls())
	}
}

func TestKeyProblemsAreReportedWithoutTheKey(t *testing.T) {
	cases := []struct {
		name   string
		secret map[string]string
		model  string
		code   codes.Code
		want   []string
	}{
		{"no agent-secrets in the namespace is a failed precondition", nil, "claude-opus-5-5", codes.FailedPrecondition,
			[]string{"agent-secrets", "ANTHROPIC_API_KEY"}},
		{"agent-secrets without the provider's key is a failed precondition", map[string]string{"ANTHROPIC_API_KEY": goodKey},
			"gpt-5", codes.FailedPrecondition, []string{"agent-secrets", "OPENAI_API_KEY"}},
		{"a wrong key surfaces the vendor's 401 as unauthenticated", map[string]string{"GEMINI_API_KEY": "sk-wrong-key-value"},
			"gemini-3-flash", codes.Unauthenticated, []string{"401"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := startStack(t, tc.secret)
			run := s.run("u-key")
			_, err := s.client.Submit(t.Context(), &batchv1.SubmitRequest{Run: run, Model: tc.model, Prompt: "p", MaxTokens: 5})
			if status.Code(err) != tc.code {
				t.Fatalf("err = %v, want %v", err, tc.code)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("%q does not mention %q", msg, w)
				}
			}
			for _, secret := range []string{goodKey, "sk-wrong-key-value"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error reveals a key value: %s", msg)
				}
			}
			// Get of a batch goes through the same key lookup.
			_, err = s.client.Get(t.Context(), &batchv1.GetRequest{Batch: &batchv1.BatchRef{Run: run,
				Provider: batchv1.Provider_PROVIDER_GEMINI, BatchId: "batches/x"}})
			if tc.code == codes.FailedPrecondition && status.Code(err) != codes.FailedPrecondition {
				t.Errorf("get err = %v", err)
			}
		})
	}
}
