// Package realtime holds what the agent-controller, the realtime-gateway and
// the supervisor must agree on for realtime runs: how a run's token is
// derived from its Agent's uid, and the well-known names (Secrets, mount
// path, environment, gRPC metadata, port) through which it travels.
package realtime

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
)

// MinKeyBytes is the shortest shared key accepted: an HMAC key shorter
// than its output would be the weakest link of the token.
const MinKeyBytes = 32

// tokenContext separates this use of the shared key from any other the key
// might one day get, so a token can never double as another MAC.
const tokenContext = "agentplane/realtime/run-token/v1\x00"

// ErrShortKey says the shared key is too short to derive tokens from.
var ErrShortKey = errors.New("realtime key is too short")

// CheckKey reports whether key is fit to derive tokens: the controller and
// the gateway refuse to run realtime sessions with a weak key rather than
// hand out guessable tokens.
func CheckKey(key []byte) error {
	if len(key) < MinKeyBytes {
		return fmt.Errorf("%w: %d bytes, want at least %d", ErrShortKey, len(key), MinKeyBytes)
	}
	return nil
}

// Token derives a run's token: HMAC-SHA256 over the Agent's uid with the
// shared key, base64url without padding (43 characters). The uid alone is
// readable by anyone who can read the Agent; the token is not, since only
// the holders of the key can compute it.
func Token(key []byte, uid string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(tokenContext))
	m.Write([]byte(uid))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// Verify reports whether token is the one Token derives for uid with key.
// An empty key, uid or token never verifies, and the comparison takes the
// same time wherever the first difference is.
func Verify(key []byte, uid, token string) bool {
	if len(key) == 0 || uid == "" || token == "" {
		return false
	}
	return Equal(Token(key, uid), token)
}

// Equal compares a presented token with the expected one in constant time.
// The supervisor, which holds only its own token and not the key, checks
// callers with it. An empty expected or presented token never matches.
func Equal(want, got string) bool {
	if want == "" || got == "" {
		return false
	}
	return subtle.ConstantTimeCompare([]byte(want), []byte(got)) == 1
}
