package realtime

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

var (
	keyA = bytes.Repeat([]byte{0xA5}, MinKeyBytes)
	keyB = bytes.Repeat([]byte{0x5A}, MinKeyBytes)
)

const uid = "0f8d2c4e-1b7a-4c3e-9d21-5e6f7a8b9c0d"

// TestTokenDependsOnKeyAndUID checks that the token changes with either
// input, is stable for the same inputs, and never is the uid itself.
func TestTokenDependsOnKeyAndUID(t *testing.T) {
	base := Token(keyA, uid)
	if base != Token(keyA, uid) {
		t.Fatal("same key and uid gave two tokens")
	}
	for _, tc := range []struct {
		name string
		key  []byte
		uid  string
	}{
		{"another uid gives another token", keyA, "0f8d2c4e-1b7a-4c3e-9d21-5e6f7a8b9c0e"},
		{"another key gives another token", keyB, uid},
		{"an empty uid gives another token", keyA, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Token(tc.key, tc.uid); got == base {
				t.Fatalf("token %q equals the base token", got)
			}
		})
	}
}

// TestTokenIsNotTheUID checks that the uid, which anyone reading the Agent
// sees, never is or contains the token.
func TestTokenIsNotTheUID(t *testing.T) {
	for _, u := range []string{uid, "", "x", strings.Repeat("a", 43)} {
		tok := Token(keyA, u)
		// A short uid can occur in any base64 text by chance; a real one
		// (36 characters) cannot.
		if tok == u || (len(u) >= 8 && strings.Contains(tok, u)) {
			t.Fatalf("token %q reveals uid %q", tok, u)
		}
		if len(tok) != 43 {
			t.Fatalf("token %q is %d characters, want 43 (base64url of 32 bytes)", tok, len(tok))
		}
	}
}

// TestVerifyAcceptsOnlyTheRunsToken checks Verify against each way a token
// can be wrong.
func TestVerifyAcceptsOnlyTheRunsToken(t *testing.T) {
	good := Token(keyA, uid)
	for _, tc := range []struct {
		name  string
		key   []byte
		uid   string
		token string
		want  bool
	}{
		{"the run's own token verifies", keyA, uid, good, true},
		{"an empty token is refused", keyA, uid, "", false},
		{"the uid as token is refused", keyA, uid, uid, false},
		{"another key's token is refused", keyA, uid, Token(keyB, uid), false},
		{"another run's token is refused", keyA, uid, Token(keyA, uid+"x"), false},
		{"a truncated token is refused", keyA, uid, good[:len(good)-1], false},
		{"a token with a byte more is refused", keyA, uid, good + "A", false},
		{"an empty key verifies nothing", nil, uid, Token(nil, uid), false},
		{"an empty uid verifies nothing", keyA, "", Token(keyA, ""), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Verify(tc.key, tc.uid, tc.token); got != tc.want {
				t.Fatalf("Verify = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestEqualRefusesEmpty checks that the supervisor's comparison never lets
// an empty token through, even against an empty expectation.
func TestEqualRefusesEmpty(t *testing.T) {
	for _, tc := range []struct {
		name, want, got string
		ok              bool
	}{
		{"equal tokens match", "abc", "abc", true},
		{"different tokens do not match", "abc", "abd", false},
		{"an empty presented token does not match", "abc", "", false},
		{"an empty expected token matches nothing", "", "", false},
		{"a prefix does not match", "abc", "ab", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if Equal(tc.want, tc.got) != tc.ok {
				t.Fatalf("Equal(%q, %q) = %v, want %v", tc.want, tc.got, !tc.ok, tc.ok)
			}
		})
	}
}

// TestCheckKeyRefusesShortKeys checks the key length floor.
func TestCheckKeyRefusesShortKeys(t *testing.T) {
	if err := CheckKey(keyA); err != nil {
		t.Fatalf("a %d-byte key was refused: %v", len(keyA), err)
	}
	for _, k := range [][]byte{nil, []byte("short"), keyA[:MinKeyBytes-1]} {
		if err := CheckKey(k); !errors.Is(err, ErrShortKey) {
			t.Fatalf("CheckKey(%d bytes) = %v, want ErrShortKey", len(k), err)
		}
	}
}

// TestTokenSecretNameFitsKubernetes checks that a uid-sized name stays a
// valid, short Secret name.
func TestTokenSecretNameFitsKubernetes(t *testing.T) {
	n := TokenSecretName(uid)
	if n != "agentplane-rt-"+uid || len(n) > 63 {
		t.Fatalf("token secret name %q", n)
	}
}

// FuzzVerify checks that only the derived token verifies, for any uid and
// presented token.
func FuzzVerify(f *testing.F) {
	f.Add(uid, Token(keyA, uid))
	f.Add(uid, "")
	f.Add("", "")
	f.Add(uid, uid)
	f.Fuzz(func(t *testing.T, u, tok string) {
		want := u != "" && tok == Token(keyA, u)
		if got := Verify(keyA, u, tok); got != want {
			t.Fatalf("Verify(%q, %q) = %v, want %v", u, tok, got, want)
		}
	})
}
