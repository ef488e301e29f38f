package kubeutil

import "net/url"

// DisplayURL is raw as a status condition or an event may show it: its
// scheme, host and path, without the user information and the query and
// fragment, where a URL carries credentials (https://user:token@host,
// ?key=...). Whoever may read an object's status may not read its Secrets,
// so a URL a spec names is never echoed whole. A URL that does not parse,
// or has no host, is not shown at all.
func DisplayURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" {
		return "(a URL that does not parse)"
	}
	return (&url.URL{Scheme: u.Scheme, Host: u.Host, Path: u.Path}).String()
}
