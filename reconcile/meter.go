package reconcile

import (
	"context"
	"sync/atomic"

	"tidemark/lake/store"
)

// meter is a store that counts the bytes read through it, so a report can
// say what a run fetched (the measure of "cost proportional to the affected
// partitions").
type meter struct {
	store.Store
	read atomic.Int64
}

var _ store.Store = (*meter)(nil)

func (m *meter) Open(ctx context.Context, key string) (store.Reader, error) {
	r, err := m.Store.Open(ctx, key)
	if err != nil {
		return nil, err
	}
	return &meteredReader{Reader: r, m: m}, nil
}

type meteredReader struct {
	store.Reader
	m *meter
}

func (r *meteredReader) ReadAt(p []byte, off int64) (int, error) {
	n, err := r.Reader.ReadAt(p, off)
	r.m.read.Add(int64(n))
	return n, err
}
