package state

import (
	"context"
	"sync"
)

// Memory is a Store in the process: one replica's table, lost on
// restart. batch-poller uses it when no NATS server is configured.
type Memory struct {
	mu   sync.Mutex
	rev  uint64
	recs map[string]memRecord
}

type memRecord struct {
	r   Record
	rev uint64
}

// NewMemory returns an empty Memory.
func NewMemory() *Memory { return &Memory{recs: map[string]memRecord{}} }

// Get implements Store.
func (m *Memory) Get(_ context.Context, key string) (Record, uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mr, ok := m.recs[key]
	if !ok {
		return Record{}, 0, ErrNotFound
	}
	return mr.r, mr.rev, nil
}

// Create implements Store.
func (m *Memory) Create(_ context.Context, key string, r Record) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.recs[key]; ok {
		return 0, ErrExists
	}
	return m.put(key, r), nil
}

// Update implements Store.
func (m *Memory) Update(_ context.Context, key string, r Record, rev uint64) (uint64, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if mr, ok := m.recs[key]; !ok || mr.rev != rev {
		return 0, ErrConflict
	}
	return m.put(key, r), nil
}

// Delete implements Store.
func (m *Memory) Delete(_ context.Context, key string, rev uint64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	mr, ok := m.recs[key]
	if !ok {
		return nil
	}
	if mr.rev != rev {
		return ErrConflict
	}
	delete(m.recs, key)
	return nil
}

// Len is the number of records.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

func (m *Memory) put(key string, r Record) uint64 {
	m.rev++
	m.recs[key] = memRecord{r: r, rev: m.rev}
	return m.rev
}
