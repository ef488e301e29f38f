package run

import (
	"strings"
	"testing"
	"unicode/utf8"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/agentplane/agentplane/libs/realtime"
)

const testToken = "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0Z2FycGx5"

// TestCheckPromptAdmitsOnlyTheRunsTokenAndUsableText checks each rule of
// a prompt's admission, and that the token is checked before the text.
func TestCheckPromptAdmitsOnlyTheRunsTokenAndUsableText(t *testing.T) {
	tests := []struct {
		name, got, text string
		want            codes.Code
	}{
		{"the run's token and a text are admitted", testToken, "hello", codes.OK},
		{"a missing token is unauthenticated", "", "hello", codes.Unauthenticated},
		{"a wrong token is unauthenticated", testToken + "x", "hello", codes.Unauthenticated},
		{"a wrong token is refused before the text is looked at", "nope", "", codes.Unauthenticated},
		{"an empty text is invalid", testToken, "", codes.InvalidArgument},
		{"a blank text is invalid", testToken, " \n\t", codes.InvalidArgument},
		{"a NUL byte is invalid", testToken, "a\x00b", codes.InvalidArgument},
		{"invalid UTF-8 is invalid", testToken, "a\xffb", codes.InvalidArgument},
		{"a text at the size limit is admitted", testToken, strings.Repeat("x", realtime.MaxPromptBytes), codes.OK},
		{"a text over the size limit is invalid", testToken, strings.Repeat("x", realtime.MaxPromptBytes+1), codes.InvalidArgument},
		{"a text starting with a dash is admitted (vendors fence it)", testToken, "--help", codes.OK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkPrompt(testToken, tt.got, tt.text)
			if status.Code(err) != tt.want {
				t.Fatalf("checkPrompt = %v, want %v", err, tt.want)
			}
			if err != nil && strings.Contains(err.Error(), testToken) {
				t.Fatal("the error message echoes the token")
			}
		})
	}
}

// FuzzCheckPrompt checks, for any presented token and text, that a prompt
// is admitted exactly when the token is the run's and the text is usable,
// that a refusal is Unauthenticated whenever the token is wrong, and that
// no refusal echoes the token.
func FuzzCheckPrompt(f *testing.F) {
	f.Add(testToken, "hello")
	f.Add("", "hello")
	f.Add(testToken, "")
	f.Add(testToken, "a\x00b")
	f.Add(testToken[:10], "\xff")
	f.Add(testToken, " ")
	f.Fuzz(func(t *testing.T, got, text string) {
		err := checkPrompt(testToken, got, text)
		tokenOK := got == testToken
		textOK := strings.TrimSpace(text) != "" && len(text) <= realtime.MaxPromptBytes &&
			!strings.ContainsRune(text, 0) && utf8.ValidString(text)
		switch {
		case !tokenOK && status.Code(err) != codes.Unauthenticated:
			t.Fatalf("wrong token %q: %v, want Unauthenticated", got, err)
		case tokenOK && !textOK && status.Code(err) != codes.InvalidArgument:
			t.Fatalf("unusable text %q: %v, want InvalidArgument", text, err)
		case tokenOK && textOK && err != nil:
			t.Fatalf("admissible prompt refused: %v", err)
		}
		if err != nil && strings.Contains(status.Convert(err).Message(), testToken) {
			t.Fatal("the refusal echoes the token")
		}
	})
}
