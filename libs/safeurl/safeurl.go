// Package safeurl shows a URL, and an error about a request to it, without
// the credentials a URL may carry: user information
// (https://user:token@host) and the query and fragment (?key=...,
// #access_token=...). Logs, errors, status conditions and events name a
// URL through it; whoever reads those may not read the Secrets.
package safeurl

import (
	"errors"
	"net/url"
)

// String is u's scheme, host and path.
func String(u *url.URL) string {
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}

// Unparsable stands for a URL Parse cannot show: one that does not parse
// or has no host, which may be a credential written in the wrong place.
const Unparsable = "(a URL that does not parse)"

// Parse is raw's scheme, host and path, or Unparsable.
func Parse(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return Unparsable
	}
	return String(u)
}

// Err is err without the URL a *url.Error inside it repeats whole (the
// HTTP client's errors and url.Parse's do): the operation and its cause,
// for a message that names the URL through String or Parse.
func Err(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return &opError{op: ue.Op, err: ue.Err}
	}
	return err
}

// opError is a *url.Error without its URL.
type opError struct {
	op  string
	err error
}

func (e *opError) Error() string { return e.op + ": " + e.err.Error() }

// Unwrap lets errors.Is and errors.As see the cause (a timeout, a refused
// connection).
func (e *opError) Unwrap() error { return e.err }
