package state

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentplane/agentplane/libs/events/eventstest"
)

// stores are the implementations every rule runs against: each test gets
// a fresh, empty one.
func stores(t *testing.T) map[string]func(t *testing.T) Store {
	t.Helper()
	return map[string]func(t *testing.T) Store{
		"memory": func(*testing.T) Store { return NewMemory() },
		"jetstream": func(t *testing.T) Store {
			return NewKV(eventstest.Start(t).JetStream(), KVConfig{TTL: time.Hour})
		},
	}
}

func TestStoreRules(t *testing.T) {
	rec := Record{Namespace: "team-a", Agent: "a1", UID: "u-1", Provider: "anthropic", SubmittingBy: "poller-0",
		SubmittingSince: time.Date(2026, 12, 1, 0, 0, 0, 0, time.UTC)}
	const key = "run.team-a.u-1"
	cases := []struct {
		name  string
		check func(t *testing.T, ctx context.Context, s Store)
	}{
		{"a run with no record is ErrNotFound", func(t *testing.T, ctx context.Context, s Store) {
			if _, _, err := s.Get(ctx, key); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get = %v, want ErrNotFound", err)
			}
		}},
		{"create claims a run with no record and get reads it back", func(t *testing.T, ctx context.Context, s Store) {
			rev := mustCreate(t, ctx, s, key, rec)
			got, grev, err := s.Get(ctx, key)
			if err != nil || grev != rev || got.SubmittingBy != "poller-0" || !got.SubmittingSince.Equal(rec.SubmittingSince) || got.Submitted() {
				t.Fatalf("Get = %+v rev %d %v, want the claim at rev %d", got, grev, err, rev)
			}
		}},
		{"only one of two creates of a run wins", func(t *testing.T, ctx context.Context, s Store) {
			mustCreate(t, ctx, s, key, rec)
			if _, err := s.Create(ctx, key, rec); !errors.Is(err, ErrExists) {
				t.Fatalf("second Create = %v, want ErrExists", err)
			}
		}},
		{"an update at the revision read wins", func(t *testing.T, ctx context.Context, s Store) {
			rev := mustCreate(t, ctx, s, key, rec)
			done := rec
			done.BatchID, done.SubmittingBy = "msgbatch_1", ""
			next, err := s.Update(ctx, key, done, rev)
			if err != nil || next == rev {
				t.Fatalf("Update = rev %d, %v", next, err)
			}
			if got, _, _ := s.Get(ctx, key); got.BatchID != "msgbatch_1" || !got.Submitted() {
				t.Fatalf("after Update: %+v", got)
			}
		}},
		{"an update at an older revision is refused: the other writer won", func(t *testing.T, ctx context.Context, s Store) {
			rev := mustCreate(t, ctx, s, key, rec)
			won := rec
			won.Notified = true
			if _, err := s.Update(ctx, key, won, rev); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Update(ctx, key, won, rev); !errors.Is(err, ErrConflict) {
				t.Fatalf("stale Update = %v, want ErrConflict", err)
			}
		}},
		{"an update of a run with no record is refused", func(t *testing.T, ctx context.Context, s Store) {
			if _, err := s.Update(ctx, key, rec, 7); !errors.Is(err, ErrConflict) {
				t.Fatalf("Update = %v, want ErrConflict", err)
			}
		}},
		{"a delete at an older revision is refused and keeps the record", func(t *testing.T, ctx context.Context, s Store) {
			rev := mustCreate(t, ctx, s, key, rec)
			if _, err := s.Update(ctx, key, rec, rev); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, key, rev); !errors.Is(err, ErrConflict) {
				t.Fatalf("stale Delete = %v, want ErrConflict", err)
			}
			if _, _, err := s.Get(ctx, key); err != nil {
				t.Fatalf("record lost by a refused delete: %v", err)
			}
		}},
		{"a deleted run can be claimed again and a second delete is no error", func(t *testing.T, ctx context.Context, s Store) {
			rev := mustCreate(t, ctx, s, key, rec)
			if err := s.Delete(ctx, key, rev); err != nil {
				t.Fatal(err)
			}
			if err := s.Delete(ctx, key, rev); err != nil {
				t.Fatalf("second Delete = %v, want nil", err)
			}
			if _, _, err := s.Get(ctx, key); !errors.Is(err, ErrNotFound) {
				t.Fatalf("Get after Delete = %v, want ErrNotFound", err)
			}
			mustCreate(t, ctx, s, key, rec)
		}},
	}
	for impl, open := range stores(t) {
		for _, c := range cases {
			t.Run(impl+"/"+c.name, func(t *testing.T) {
				c.check(t, t.Context(), open(t))
			})
		}
	}
}

func mustCreate(t *testing.T, ctx context.Context, s Store, key string, r Record) uint64 {
	t.Helper()
	rev, err := s.Create(ctx, key, r)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	return rev
}

// TestKVRecordsOutliveTheServerAndTheProcess: what one process wrote is
// read by another (a restarted replica) after the NATS server restarted,
// because the bucket is on the server's file storage.
func TestKVRecordsOutliveTheServerAndTheProcess(t *testing.T) {
	srv := eventstest.Start(t)
	first := NewKV(srv.JetStream(), KVConfig{TTL: time.Hour})
	key := Key("team-a", "u-1")
	if _, err := first.Create(t.Context(), key, Record{Namespace: "team-a", UID: "u-1", BatchID: "b-1"}); err != nil {
		t.Fatal(err)
	}
	srv.Restart()
	second := NewKV(srv.JetStream(), KVConfig{TTL: time.Hour})
	got, _, err := second.Get(t.Context(), key)
	if err != nil || got.BatchID != "b-1" {
		t.Fatalf("after restart: %+v, %v", got, err)
	}
}

// TestKVWaitsForTheServer: a store made while NATS is away fails its
// calls with the reason, and works once the server is back.
func TestKVWaitsForTheServer(t *testing.T) {
	srv := eventstest.Start(t)
	js := srv.JetStream()
	s := NewKV(js, KVConfig{})
	srv.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	if _, _, err := s.Get(ctx, "run.a.b"); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("Get with NATS away = %v, want the connection's error", err)
	}
	srv.Restart()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, _, err := s.Get(t.Context(), "run.a.b")
		if errors.Is(err, ErrNotFound) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Get after NATS came back = %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestKeyIsKeySafe(t *testing.T) {
	cases := []struct {
		name, ns, uid string
		// want is the readable key; empty wants a hashed one.
		want string
	}{
		{"namespace and apiserver uid read as they are", "team-a", "0b6f4a9e-5c1e-4a5e-9d1c-2f7b9e0a1c3d", "run.team-a.0b6f4a9e-5c1e-4a5e-9d1c-2f7b9e0a1c3d"},
		{"a uid with a dot is hashed, never split into tokens", "team-a", "a.b", ""},
		{"an empty uid is hashed", "team-a", "", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Key(c.ns, c.uid)
			if !validKey(got) {
				t.Fatalf("Key(%q, %q) = %q is not a valid key", c.ns, c.uid, got)
			}
			if c.want != "" && got != c.want {
				t.Fatalf("Key = %q, want %q", got, c.want)
			}
			if c.want == "" && (!strings.HasPrefix(got, "run.h.") || len(got) != len("run.h.")+32) {
				t.Fatalf("Key = %q, want a hashed key", got)
			}
		})
	}
	if Key("a", "b.c") == Key("a.b", "c") {
		t.Fatal("two runs share a key")
	}
}

// validKey is JetStream's rule for a key: tokens of [-/_=a-zA-Z0-9]
// joined by dots, none empty.
func validKey(k string) bool {
	if k == "" || k[0] == '.' || k[len(k)-1] == '.' {
		return false
	}
	prev := byte('.')
	for i := range len(k) {
		c := k[i]
		switch {
		case c == '.':
			if prev == '.' {
				return false
			}
		case c == '-' || c == '/' || c == '_' || c == '=' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z':
		default:
			return false
		}
		prev = c
	}
	return true
}
