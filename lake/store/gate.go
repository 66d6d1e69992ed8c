package store

import (
	"context"
	"sync"
)

// Gate holds back what a writer publishes until it opens, so a writer can
// do its work (encode and write its temp files, fsync them) before it may
// make anything of it visible. A stream encodes batch N+1's data files
// while batch N commits, and no object of N+1 reaches the store before N+1's
// write-ahead entry is durable.
//
// Every Put, PutIfAbsent and Publish called with a context carrying a gate
// (WithGate) waits for the gate first: the directory store after writing
// and fsyncing its temp file, before the rename; S3 before the upload.
// Reads and deletes are not held.
type Gate struct {
	open    chan struct{}
	err     error
	reached chan struct{}
	reach   sync.Once
}

// NewGate returns a closed gate.
func NewGate() *Gate {
	return &Gate{open: make(chan struct{}), reached: make(chan struct{})}
}

// Open lets every waiter through, or with err fails each (and every later
// one) with err. Call it once.
func (g *Gate) Open(err error) {
	g.err = err
	close(g.open)
	g.reach.Do(func() { close(g.reached) })
}

// Reached is closed once a writer first waited at the gate (its first
// object is written and waits to be published), or the gate opened.
func (g *Gate) Reached() <-chan struct{} { return g.reached }

// wait blocks until the gate opens or ctx ends.
func (g *Gate) wait(ctx context.Context) error {
	g.reach.Do(func() { close(g.reached) })
	select {
	case <-g.open:
		return g.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

type gateKey struct{}

// WithGate returns ctx carrying g: the store calls made with it publish
// nothing before g opens.
func WithGate(ctx context.Context, g *Gate) context.Context {
	return context.WithValue(ctx, gateKey{}, g)
}

// awaitGate waits for the gate ctx carries, if any.
func awaitGate(ctx context.Context) error {
	if g, ok := ctx.Value(gateKey{}).(*Gate); ok {
		return g.wait(ctx)
	}
	return nil
}
