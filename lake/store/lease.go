package store

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"time"
)

// ErrLocked matches every error saying that someone else holds a lease or a
// local lock (errors.Is).
var ErrLocked = errors.New("store: locked")

// ErrLeaseLost matches the error of a Lease whose holder learnt that it no
// longer holds it: the lease object was taken over or deleted, or could not
// be renewed before it expired. The holder must stop writing.
var ErrLeaseLost = errors.New("store: lease lost")

// Locker is an optional power of a Store: a lock on a local file that the
// kernel drops when the holding process dies, kill -9 included (flock(2) on
// the directory store). Lock writes note into the locked file, for whoever
// finds it locked, and fails with an error matching ErrLocked while another
// holder has it; unlock gives it up.
type Locker interface {
	Lock(key string, note []byte) (unlock func() error, err error)
}

// LeaseConfig says which lease to take and for how long.
type LeaseConfig struct {
	// Key is the lease object.
	Key string
	// LocalKey is the file locked beside it when the store is a Locker;
	// "" means Key + ".flock".
	LocalKey string
	// Local makes the local lock, where the store has one, the whole lease:
	// no lease object, nothing to expire, the kernel frees it. Without
	// Local the lease object is taken too (it is what other hosts see) and
	// the local lock only proves a holder of this host dead.
	Local bool
	// Owner names the holder in errors (a host name, a user's label).
	Owner string
	// ID identifies this holding (a run id); "" means a random one.
	ID string
	// TTL is how long a lease lives without renewal; it must be positive.
	TTL time.Duration
	// Renew is the heartbeat period; 0 means TTL/3.
	Renew time.Duration
	// Clock gives the lease's times; nil means time.Now.
	Clock func() time.Time
}

// LeaseHolder is the content of a lease object.
type LeaseHolder struct {
	Owner    string    `json:"owner"`
	ID       string    `json:"run_id,omitempty"`
	Host     string    `json:"host,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Acquired time.Time `json:"acquired,omitzero"`
	Expires  time.Time `json:"expires"`
	// LegacyExpires is how leases written by older streams said Expires.
	LegacyExpires int64 `json:"expires_unix_ms,omitempty"`
}

// String names the holder for messages: owner, run, host and pid, those
// that are known.
func (h LeaseHolder) String() string {
	var parts []string
	add := func(name, v string) {
		if v != "" {
			parts = append(parts, name+" "+v)
		}
	}
	add("owner", h.Owner)
	add("run", h.ID)
	add("host", h.Host)
	if h.PID > 0 {
		add("pid", fmt.Sprint(h.PID))
	}
	if len(parts) == 0 {
		return "unknown holder"
	}
	return strings.Join(parts, ", ")
}

// HeldError says who holds a lease: it matches ErrLocked.
type HeldError struct {
	Key    string
	Holder LeaseHolder
	// Age is how long the holder has held it; 0 when unknown.
	Age time.Duration
}

// Error names the holder, its age and its expiry, so whoever reads it knows
// whether to wait or to look for a stuck process.
func (e *HeldError) Error() string {
	age := "unknown time"
	if e.Age > 0 {
		age = e.Age.Round(time.Second).String()
	}
	exp := "unknown"
	if !e.Holder.Expires.IsZero() {
		exp = e.Holder.Expires.UTC().Format(time.RFC3339)
	}
	return fmt.Sprintf("store: lease %s held by %s for %s, until %s", e.Key, e.Holder, age, exp)
}

// Is makes errors.Is(err, ErrLocked) true.
func (e *HeldError) Is(target error) bool { return target == ErrLocked }

// Lease is a held lease: one holder at a time per key, on every backend. A
// heartbeat renews it every Renew; a lease not renewed for TTL is stale and
// taken over, at once if its holder is provably dead on this host (the
// local lock was free, or its pid is gone). A takeover goes through a steal
// marker (Key + ".steal." + stale holder's id) that only one taker can
// create, so two processes that both found the lease stale cannot both end
// up holding it; the winner removes the marker once its own lease is in
// place.
//
// The heartbeat re-reads the lease before renewing it and stops at the
// first sign it is no longer ours (Lost, Err); Release deletes it only if it
// is still ours. Where the store is a Swapper (S3: If-Match) both are one
// conditional request. On the directory store the flock held for the whole
// lease excludes every other holder of this host, so read, check and write
// cannot interleave with a taker's. Elsewhere (a directory store without
// flock, on Windows) a takeover between the read and the write is not
// excluded: the window is one round trip, and only a holder that already
// outlived its TTL can hit it.
type Lease struct {
	st      Store
	cfg     LeaseConfig
	host    string
	body    LeaseHolder
	tag     string       // the lease object's version, where the store is a Swapper
	expires time.Time    // the lease object's last written expiry
	unlock  func() error // local lock, nil if none
	stop    chan struct{}
	done    chan struct{}
	once    sync.Once

	lostOnce sync.Once
	lost     chan struct{} // closed when the lease is lost
	lostErr  error         // why; set before lost is closed
}

// AcquireLease takes the lease or fails with a *HeldError naming the holder.
func AcquireLease(ctx context.Context, st Store, cfg LeaseConfig) (*Lease, error) {
	if cfg.Key == "" || cfg.TTL <= 0 {
		return nil, fmt.Errorf("store: lease needs a key and a positive TTL, got %q and %s", cfg.Key, cfg.TTL)
	}
	if cfg.LocalKey == "" {
		cfg.LocalKey = cfg.Key + ".flock"
	}
	if cfg.Renew <= 0 {
		cfg.Renew = max(cfg.TTL/3, time.Millisecond)
	}
	if cfg.Clock == nil {
		cfg.Clock = time.Now
	}
	if cfg.ID == "" {
		var b [8]byte
		_, _ = rand.Read(b[:])
		cfg.ID = hex.EncodeToString(b[:])
	}
	host, _ := os.Hostname()
	l := &Lease{st: st, cfg: cfg, host: host, stop: make(chan struct{}), done: make(chan struct{}), lost: make(chan struct{})}
	if lk, ok := st.(Locker); ok {
		body, data := l.newBody()
		unlock, err := lk.Lock(cfg.LocalKey, data)
		if errors.Is(err, ErrLocked) {
			// A live process of this host holds it: name it from its note
			// (or its lease object).
			key := cfg.Key
			if cfg.Local {
				key = cfg.LocalKey
			}
			held, _, _, rerr := l.read(ctx, key)
			if rerr != nil {
				held = LeaseHolder{}
			}
			e := l.held(held)
			e.Key = key
			return nil, e
		}
		if err != nil {
			return nil, fmt.Errorf("take lease %s: %w", cfg.Key, err)
		}
		l.unlock = unlock
		if cfg.Local {
			l.body = body
			close(l.done) // no heartbeat
			return l, nil
		}
	}
	if err := l.take(ctx); err != nil {
		if l.unlock != nil {
			err = errors.Join(err, l.unlock())
		}
		return nil, err
	}
	l.expires = l.body.Expires
	if _, ok := st.(Swapper); ok {
		// The version to renew from. Only we write our id, so a lease with
		// it is the one we just put.
		if _, id, tag, err := l.read(ctx, cfg.Key); err == nil && id == cfg.ID {
			l.tag = tag
		}
	}
	l.sweepMarkers(ctx)
	go l.heartbeat()
	return l, nil
}

// sweepMarkers removes the steal markers takers killed mid-takeover left
// behind. It is safe while we hold the lease: a taker still at work finds,
// when it re-reads the lease, that it is ours and not the one it meant to
// take over. A marker that stays (a failed delete) only costs the next
// sweep, so errors are not worth failing the acquisition for.
func (l *Lease) sweepMarkers(ctx context.Context) {
	infos, err := l.st.List(ctx, l.cfg.Key+".steal.")
	if err != nil {
		return
	}
	for _, i := range infos {
		_ = l.st.Delete(ctx, i.Key)
	}
}

func (l *Lease) newBody() (LeaseHolder, []byte) {
	now := l.cfg.Clock()
	b := LeaseHolder{Owner: l.cfg.Owner, ID: l.cfg.ID, Host: l.host, PID: os.Getpid(), Acquired: now.UTC(), Expires: now.Add(l.cfg.TTL).UTC()}
	data, _ := json.Marshal(b) // plain fields: cannot fail
	return b, data
}

func (l *Lease) held(h LeaseHolder) *HeldError {
	e := &HeldError{Key: l.cfg.Key, Holder: h}
	if !h.Acquired.IsZero() {
		e.Age = l.cfg.Clock().Sub(h.Acquired)
	}
	return e
}

// read returns the lease object's holder, an id for it (its own, or one
// derived from the bytes of a damaged or id-less lease) and, where the
// store is a Swapper, the version read.
func (l *Lease) read(ctx context.Context, key string) (LeaseHolder, string, string, error) {
	var raw []byte
	var tag string
	var err error
	if sw, ok := l.st.(Swapper); ok {
		raw, tag, err = sw.ReadVersion(ctx, key)
	} else {
		raw, err = ReadAll(ctx, l.st, key)
	}
	if err != nil {
		return LeaseHolder{}, "", "", err
	}
	var h LeaseHolder
	if err := json.Unmarshal(raw, &h); err != nil {
		h = LeaseHolder{Owner: "unknown (damaged lease)"} // stale: it has no expiry
	}
	if h.Expires.IsZero() && h.LegacyExpires != 0 {
		h.Expires = time.UnixMilli(h.LegacyExpires).UTC()
	}
	id := h.ID
	if id == "" {
		sum := sha256.Sum256(raw)
		id = "h" + hex.EncodeToString(sum[:8])
	}
	return h, id, tag, nil
}

// deleteIf deletes the lease object at key if it is still version tag
// (where the store is a Swapper; otherwise unconditionally, see Lease).
func (l *Lease) deleteIf(ctx context.Context, key, tag string) error {
	if sw, ok := l.st.(Swapper); ok && tag != "" {
		return sw.DeleteIfMatch(ctx, key, tag)
	}
	return l.st.Delete(ctx, key)
}

// stale reports whether a lease may be taken over: expired, or its holder
// is provably dead on this host.
func (l *Lease) stale(h LeaseHolder, now time.Time) bool {
	if !now.Before(h.Expires) {
		return true
	}
	if h.Host == "" || h.Host != l.host {
		return false
	}
	if l.unlock != nil {
		return true // a live holder on this host would hold the local lock
	}
	return h.PID > 0 && h.PID != os.Getpid() && processGone(h.PID)
}

func (l *Lease) take(ctx context.Context) error {
	for attempt := 0; attempt < 3; attempt++ {
		body, data := l.newBody()
		err := l.st.PutIfAbsent(ctx, l.cfg.Key, data)
		if err == nil {
			l.body = body
			return nil
		}
		if !errors.Is(err, ErrExists) {
			return fmt.Errorf("take lease %s: %w", l.cfg.Key, err)
		}
		held, id, _, err := l.read(ctx, l.cfg.Key)
		if errors.Is(err, ErrNotExist) {
			continue // released meanwhile
		}
		if err != nil {
			return fmt.Errorf("read lease %s: %w", l.cfg.Key, err)
		}
		if !l.stale(held, l.cfg.Clock()) {
			return l.held(held)
		}
		took, err := l.steal(ctx, held, id, body, data)
		if err != nil || took {
			return err
		}
	}
	return fmt.Errorf("take lease %s: lost the race three times", l.cfg.Key)
}

// steal takes over the stale lease of holder id. took is false when the
// lease is free to race for again.
func (l *Lease) steal(ctx context.Context, held LeaseHolder, id string, body LeaseHolder, data []byte) (took bool, err error) {
	marker := l.cfg.Key + ".steal." + id
	if err := l.st.PutIfAbsent(ctx, marker, data); err != nil {
		if !errors.Is(err, ErrExists) {
			return false, fmt.Errorf("take over stale lease %s: %w", l.cfg.Key, err)
		}
		// Another taker is at it, or died at it: a marker as stale as a
		// lease (older than the TTL, or left by a process of this host that
		// is gone) is removed, and the lease raced for again.
		m, _, _, merr := l.read(ctx, marker)
		if merr == nil && !l.stale(m, l.cfg.Clock()) {
			return false, l.held(held)
		}
		if err := l.st.Delete(ctx, marker); err != nil {
			return false, fmt.Errorf("remove stale marker %s: %w", marker, err)
		}
		return false, nil
	}
	defer func() {
		// Once our own lease is in place (or we lost), the marker has done
		// its work: a taker that finds the stale lease's id free again
		// re-reads the lease below and sees it is gone or someone else's.
		if derr := l.st.Delete(ctx, marker); derr != nil {
			err = errors.Join(err, fmt.Errorf("remove steal marker %s: %w", marker, derr))
		}
	}()
	_, cur, tag, err := l.read(ctx, l.cfg.Key)
	switch {
	case errors.Is(err, ErrNotExist):
	case err != nil:
		return false, fmt.Errorf("read lease %s: %w", l.cfg.Key, err)
	case cur != id:
		return false, nil // taken over by someone else meanwhile: look again
	default:
		// Only the stale version: if its holder released it and a plain
		// taker got it meanwhile, theirs stays.
		err := l.deleteIf(ctx, l.cfg.Key, tag)
		if errors.Is(err, ErrChanged) {
			return false, nil
		}
		if err != nil {
			return false, fmt.Errorf("delete stale lease %s: %w", l.cfg.Key, err)
		}
	}
	if err := l.st.PutIfAbsent(ctx, l.cfg.Key, data); err != nil {
		if errors.Is(err, ErrExists) {
			return false, nil // a plain taker got in first
		}
		return false, fmt.Errorf("take lease %s: %w", l.cfg.Key, err)
	}
	l.body = body
	return true, nil
}

// heartbeat renews the lease until Release, or until it finds the lease
// lost.
func (l *Lease) heartbeat() {
	defer close(l.done)
	t := time.NewTicker(l.cfg.Renew)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
			ctx, cancel := context.WithTimeout(context.Background(), l.cfg.Renew+time.Second)
			lost, err := l.renew(ctx)
			cancel()
			// Stop at the last tick before the expiry: a taker may hold
			// the lease from then on.
			if lost == nil && err != nil && !l.cfg.Clock().Add(l.cfg.Renew).Before(l.expires) {
				lost = fmt.Errorf("%w: lease %s could not be renewed before it expires at %s: %w",
					ErrLeaseLost, l.cfg.Key, l.expires.UTC().Format(time.RFC3339), err)
			}
			if lost != nil {
				l.lose(lost)
				return
			}
			// A failed renewal is retried at the next tick; the lease
			// still holds until its last expiry.
		}
	}
}

// renew extends the lease if it is still ours. lost is set when it is not;
// err is a failure to try again.
func (l *Lease) renew(ctx context.Context) (lost, err error) {
	b := l.body
	b.Expires = l.cfg.Clock().Add(l.cfg.TTL).UTC()
	data, _ := json.Marshal(b)
	sw, isSwapper := l.st.(Swapper)
	if isSwapper && l.tag != "" {
		tag, err := sw.PutIfMatch(ctx, l.cfg.Key, data, l.tag)
		if err == nil {
			l.tag, l.expires = tag, b.Expires
			return nil, nil
		}
		if !errors.Is(err, ErrChanged) && !errors.Is(err, ErrNotExist) {
			return nil, err
		}
		// Changed: by a taker, or by our own renewal whose answer was
		// lost. The read below tells.
	}
	held, id, tag, err := l.read(ctx, l.cfg.Key)
	switch {
	case errors.Is(err, ErrNotExist):
		return fmt.Errorf("%w: lease %s was deleted (taken over as stale?)", ErrLeaseLost, l.cfg.Key), nil
	case err != nil:
		return nil, err
	case id != l.cfg.ID:
		return fmt.Errorf("%w: %w", ErrLeaseLost, l.held(held)), nil
	}
	if isSwapper {
		if tag, err = sw.PutIfMatch(ctx, l.cfg.Key, data, tag); err != nil {
			l.tag = "" // re-read at the next tick
			return nil, err
		}
		l.tag, l.expires = tag, b.Expires
		return nil, nil
	}
	if err := l.st.Put(ctx, l.cfg.Key, strings.NewReader(string(data)), int64(len(data))); err != nil {
		return nil, err
	}
	l.expires = b.Expires
	return nil, nil
}

// lose records why the lease is lost and tells Lost's waiters.
func (l *Lease) lose(err error) {
	l.lostOnce.Do(func() {
		l.lostErr = err
		close(l.lost)
	})
}

// Lost is closed when the heartbeat finds the lease no longer ours: taken
// over (this holder outlived its TTL: a paused VM, a long stall) or not
// renewed before it expired. A local-only lease is never lost.
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// Err returns why the lease was lost (matching ErrLeaseLost), or nil while
// it is held.
func (l *Lease) Err() error {
	select {
	case <-l.lost:
		return l.lostErr
	default:
		return nil
	}
}

// Holder returns what the lease object says about this holding.
func (l *Lease) Holder() LeaseHolder { return l.body }

// Release stops the heartbeat and deletes the lease if it is still this
// holder's; a lease already lost is left alone and its loss returned. Calls
// after the first do nothing.
func (l *Lease) Release(ctx context.Context) error {
	var err error
	l.once.Do(func() { err = l.release(ctx) })
	return err
}

func (l *Lease) release(ctx context.Context) (err error) {
	close(l.stop)
	<-l.done
	if l.unlock != nil {
		defer func() { err = errors.Join(err, l.unlock()) }()
	}
	if l.cfg.Local && l.unlock != nil {
		return nil
	}
	if err := l.Err(); err != nil {
		return fmt.Errorf("release lease %s: %w", l.cfg.Key, err)
	}
	_, id, tag, err := l.read(ctx, l.cfg.Key)
	if errors.Is(err, ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("release lease %s: %w", l.cfg.Key, err)
	}
	outlived := func() error {
		return fmt.Errorf("release lease %s: held by %s now, not %s (this holder outlived its lease)", l.cfg.Key, id, l.cfg.ID)
	}
	if id != l.cfg.ID {
		return outlived()
	}
	// Only our version: a taker that got the lease since the read keeps it.
	err = l.deleteIf(ctx, l.cfg.Key, tag)
	if errors.Is(err, ErrChanged) {
		_, id, _, _ = l.read(ctx, l.cfg.Key)
		return outlived()
	}
	if err != nil {
		return fmt.Errorf("release lease %s: %w", l.cfg.Key, err)
	}
	return nil
}
