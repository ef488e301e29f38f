package fakevendor

import (
	"net/http"
	"slices"
	"strconv"
)

// listed is what the list endpoints need of a batch: its id and its
// creation order.
type listed interface {
	listKey() (id string, seq int)
}

func (b *anthropicBatch) listKey() (string, int) { return b.id, b.seq }
func (b *openaiBatch) listKey() (string, int)    { return b.id, b.seq }
func (b *geminiBatch) listKey() (string, int)    { return b.id, b.seq }

// newestFirst lists a store's batches newest first, as the real APIs list
// them; callers hold s.mu.
func newestFirst[B listed](batches map[string]B) []B {
	all := make([]B, 0, len(batches))
	for _, b := range batches {
		all = append(all, b)
	}
	slices.SortFunc(all, func(a, b B) int {
		_, sa := a.listKey()
		_, sb := b.listKey()
		return sb - sa
	})
	return all
}

// indexOf is the position of the batch with id in all, or -1 (always for
// an empty id, which is a cursor not given).
func indexOf[B listed](all []B, id string) int {
	if id == "" {
		return -1
	}
	return slices.IndexFunc(all, func(b B) bool {
		bid, _ := b.listKey()
		return bid == id
	})
}

// renderPage renders a page of a list, with the ids of its first and last
// entries (nil when empty) that Anthropic's and OpenAI's lists report.
func renderPage[B any](page []B, render func(B) map[string]any) (data []map[string]any, first, last any) {
	data = make([]map[string]any, 0, len(page))
	for _, b := range page {
		data = append(data, render(b))
	}
	if len(data) > 0 {
		first, last = data[0]["id"], data[len(data)-1]["id"]
	}
	return data, first, last
}

// queryInt reads the integer query parameter name: def when it is absent;
// ok is false when it is not an integer in [lo, hi].
func queryInt(r *http.Request, name string, def, lo, hi int) (n int, ok bool) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, false
	}
	return n, true
}

// lockedFind looks a record up with find under s.mu and returns it with
// s.mu still held, for the handler to read and render it. When find
// returns nil it releases s.mu, calls notFound to answer 404 and returns
// nil.
func lockedFind[T any](s *Server, find func() *T, notFound func()) *T {
	s.mu.Lock()
	v := find()
	if v == nil {
		s.mu.Unlock()
		notFound()
	}
	return v
}

// replyUnlock releases s.mu, held since the record was looked up, and
// answers 200 with out, rendered under the lock.
func (s *Server) replyUnlock(w http.ResponseWriter, out map[string]any) {
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}
