package delta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	"tidemark/lake/store"
)

// Snapshot is the table's state at one version.
type Snapshot struct {
	Version  int64
	Protocol Protocol
	Metadata Metadata
	// Files are the active data files, sorted by Path.
	Files []Add
	// Tombstones are removed files not re-added since, sorted by Path (what a
	// checkpoint keeps for vacuum).
	Tombstones []Remove
	// Txns holds the latest txn action per appId.
	Txns map[string]Txn
	// CheckpointVersion is the checkpoint the snapshot was read from, -1 if
	// it was replayed from JSON only.
	CheckpointVersion int64
}

// TxnVersion returns the latest version committed by appID.
func (s *Snapshot) TxnVersion(appID string) (int64, bool) {
	t, ok := s.Txns[appID]
	return t.Version, ok
}

// Schema parses the table schema.
func (s *Snapshot) Schema() (*StructType, error) { return ParseSchema(s.Metadata.SchemaString) }

// state is the mutable replay state behind a Snapshot.
type state struct {
	version    int64
	cpVersion  int64
	protocol   *Protocol
	metadata   *Metadata
	files      map[string]*Add // by decoded path
	tombstones map[string]*Remove
	txns       map[string]Txn
}

func newState() *state {
	return &state{version: -1, cpVersion: -1, files: map[string]*Add{}, tombstones: map[string]*Remove{}, txns: map[string]Txn{}}
}

func (s *state) clone() *state {
	c := *s
	c.files = maps.Clone(s.files)
	c.tombstones = maps.Clone(s.tombstones)
	c.txns = maps.Clone(s.txns)
	return &c
}

// canonPath is the identity of a file across actions: its path decoded once,
// so two spellings of one file match.
func canonPath(p string) string { return fileKey("", p) }

func (s *state) apply(a Action) {
	switch {
	case a.Protocol != nil:
		p := *a.Protocol
		s.protocol = &p
	case a.Metadata != nil:
		m := *a.Metadata
		s.metadata = &m
	case a.Txn != nil:
		s.txns[a.Txn.AppID] = *a.Txn
	case a.Add != nil:
		k := canonPath(a.Add.Path)
		add := *a.Add
		s.files[k] = &add
		delete(s.tombstones, k)
	case a.Remove != nil:
		k := canonPath(a.Remove.Path)
		rm := *a.Remove
		delete(s.files, k)
		s.tombstones[k] = &rm
	}
}

func (s *state) snapshot() *Snapshot {
	snap := &Snapshot{Version: s.version, CheckpointVersion: s.cpVersion, Txns: maps.Clone(s.txns)}
	if s.protocol != nil {
		snap.Protocol = *s.protocol
	}
	if s.metadata != nil {
		snap.Metadata = *s.metadata
	}
	snap.Files = make([]Add, 0, len(s.files))
	for _, a := range s.files {
		snap.Files = append(snap.Files, *a)
	}
	slices.SortFunc(snap.Files, func(a, b Add) int { return strings.Compare(a.Path, b.Path) })
	snap.Tombstones = make([]Remove, 0, len(s.tombstones))
	for _, r := range s.tombstones {
		snap.Tombstones = append(snap.Tombstones, *r)
	}
	slices.SortFunc(snap.Tombstones, func(a, b Remove) int { return strings.Compare(a.Path, b.Path) })
	return snap
}

// logListing is what one listing of _delta_log found.
type logListing struct {
	commits     map[int64]string   // version -> key
	checkpoints map[int64][]string // version -> part keys, complete sets only, ordered
	latest      int64              // highest commit (or checkpoint) version, -1 if none
}

// listLog lists the whole log, or with from > 0 only the thousand-version
// blocks from the one holding from onwards (the store lists by prefix only,
// so this keeps snapshot cost independent of the table's age).
func (t *Table) listLog(ctx context.Context, from int64) (*logListing, error) {
	prefix := t.logKey("")
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	var infos []store.Info
	if from <= 0 {
		var err error
		infos, err = t.st.List(ctx, prefix)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("list %s: %w", prefix, err)
		}
	} else {
		for block := from / 1000; ; block++ {
			p := fmt.Sprintf("%s%017d", prefix, block)
			got, err := t.st.List(ctx, p)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("list %s: %w", p, err)
			}
			infos = append(infos, got...)
			if !slices.ContainsFunc(got, func(in store.Info) bool {
				return strings.HasPrefix(in.Key, fmt.Sprintf("%s%020d.", prefix, block*1000+999))
			}) {
				break
			}
		}
	}
	l := &logListing{commits: map[int64]string{}, checkpoints: map[int64][]string{}, latest: -1}
	type partSet struct {
		n     int
		parts map[int]string
	}
	multi := map[int64]*partSet{}
	for _, in := range infos {
		name := strings.TrimPrefix(in.Key, prefix)
		if strings.Contains(name, "/") || strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") {
			continue
		}
		head, rest, ok := strings.Cut(name, ".")
		if !ok || len(head) != 20 {
			continue
		}
		v, ok := parseVersion(head)
		if !ok {
			continue
		}
		switch {
		case rest == "json":
			l.commits[v] = in.Key
			l.latest = max(l.latest, v)
		case rest == "checkpoint.parquet":
			l.checkpoints[v] = []string{in.Key}
		case strings.HasPrefix(rest, "checkpoint.") && strings.HasSuffix(rest, ".parquet"):
			// checkpoint.<part>.<parts>.parquet; anything else (V2 uuid
			// checkpoints) is not ours to read.
			f := strings.Split(strings.TrimSuffix(strings.TrimPrefix(rest, "checkpoint."), ".parquet"), ".")
			if len(f) != 2 {
				continue
			}
			p, ok1 := parseVersion(f[0])
			n, ok2 := parseVersion(f[1])
			if !ok1 || !ok2 || p < 1 || p > n {
				continue
			}
			ps := multi[v]
			if ps == nil || ps.n != int(n) {
				ps = &partSet{n: int(n), parts: map[int]string{}}
				multi[v] = ps
			}
			ps.parts[int(p)] = in.Key
		}
	}
	for v, ps := range multi {
		if len(ps.parts) != ps.n {
			continue // incomplete: a writer died part way
		}
		keys := make([]string, ps.n)
		for i := range ps.n {
			keys[i] = ps.parts[i+1]
		}
		if _, single := l.checkpoints[v]; !single {
			l.checkpoints[v] = keys
		}
	}
	for v := range l.checkpoints {
		l.latest = max(l.latest, v)
	}
	return l, nil
}

// Snapshot returns the table at version (latest if version < 0). A version
// that was never committed, or whose log was cleaned up, is an error
// matching fs.ErrNotExist.
func (t *Table) Snapshot(ctx context.Context, version int64) (*Snapshot, error) {
	s, err := t.loadState(ctx, version)
	if err != nil {
		return nil, err
	}
	return s.snapshot(), nil
}

func (t *Table) loadState(ctx context.Context, version int64) (*state, error) {
	if version >= 0 && !t.opts.IgnoreCheckpoints {
		t.mu.Lock()
		c := t.cached
		t.mu.Unlock()
		if c != nil && c.version == version {
			return c.clone(), nil // states are immutable once cached
		}
	}
	var from int64
	if !t.opts.IgnoreCheckpoints {
		if lc := t.readLastCheckpoint(ctx); lc != nil && (version < 0 || version >= lc.Version) {
			from = lc.Version
		}
	}
	l, err := t.listLog(ctx, from)
	if err != nil {
		return nil, err
	}
	if _, ok := l.checkpoints[from]; from > 0 && !ok {
		// The hint names a checkpoint that is gone or incomplete.
		if l, err = t.listLog(ctx, 0); err != nil {
			return nil, err
		}
	}
	if l.latest < 0 {
		return nil, fmt.Errorf("read table %s: %w", t.path, ErrNoTable)
	}
	target := version
	if target < 0 {
		target = l.latest
	}
	if target > l.latest {
		return nil, fmt.Errorf("read table %s version %d (latest is %d): %w", t.path, target, l.latest, fs.ErrNotExist)
	}

	// Start from the cache, a checkpoint, or nothing: whichever is newest
	// and not past the target.
	var base *state
	t.mu.Lock()
	if c := t.cached; c != nil && c.version <= target && !t.opts.IgnoreCheckpoints {
		base = c.clone()
	}
	t.mu.Unlock()
	if !t.opts.IgnoreCheckpoints {
		cpv := int64(-1)
		for v := range l.checkpoints {
			if v <= target && v > cpv {
				cpv = v
			}
		}
		if cpv >= 0 && (base == nil || cpv > base.version) {
			s, err := t.readCheckpoint(ctx, cpv, l.checkpoints[cpv])
			if err != nil {
				return nil, err
			}
			base = s
		}
	}
	if base == nil {
		base = newState()
	}
	for v := base.version + 1; v <= target; v++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		key, ok := l.commits[v]
		if !ok && base.version < 0 && !t.opts.IgnoreCheckpoints && len(l.checkpoints) > 0 {
			return nil, fmt.Errorf("read table %s version %d: its commits are gone (the log keeps versions from its oldest checkpoint on): %w", t.path, target, ErrVersionExpired)
		}
		if !ok {
			return nil, fmt.Errorf("read table %s version %d: commit %s missing: %w", t.path, target, commitName(v), fs.ErrNotExist)
		}
		actions, err := t.readCommit(ctx, key)
		if err != nil {
			return nil, err
		}
		for _, a := range actions {
			base.apply(a)
		}
		base.version = v
		if base.protocol != nil {
			if err := checkReadable(*base.protocol, base.metadata); err != nil {
				return nil, fmt.Errorf("read table %s commit %d: %w", t.path, v, err)
			}
		}
	}
	if base.protocol == nil || base.metadata == nil {
		return nil, fmt.Errorf("read table %s version %d: log has no protocol or metaData", t.path, target)
	}
	if err := checkReadable(*base.protocol, base.metadata); err != nil {
		return nil, fmt.Errorf("read table %s version %d: %w", t.path, target, err)
	}
	t.remember(base)
	return base, nil
}

// remember caches s if it is the newest state seen.
func (t *Table) remember(s *state) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cached == nil || s.version > t.cached.version {
		t.cached = s.clone()
	}
}

func (t *Table) readCommit(ctx context.Context, key string) ([]Action, error) {
	data, err := store.ReadAll(ctx, t.st, key)
	if err != nil {
		return nil, fmt.Errorf("read commit %s: %w", key, err)
	}
	actions, err := DecodeActions(key, data)
	if err != nil {
		return nil, fmt.Errorf("read commit: %w", err)
	}
	return actions, nil
}

// lastCheckpoint is the _last_checkpoint document.
type lastCheckpoint struct {
	Version       int64 `json:"version"`
	Size          int64 `json:"size"`
	Parts         *int  `json:"parts,omitempty"`
	SizeInBytes   int64 `json:"sizeInBytes,omitempty"`
	NumOfAddFiles int64 `json:"numOfAddFiles,omitempty"`
}

// readLastCheckpoint returns the _last_checkpoint hint, or nil when it is
// missing or unreadable (the listing is then used instead).
func (t *Table) readLastCheckpoint(ctx context.Context) *lastCheckpoint {
	data, err := store.ReadAll(ctx, t.st, t.logKey("_last_checkpoint"))
	if err != nil {
		return nil
	}
	var lc lastCheckpoint
	if json.Unmarshal(data, &lc) != nil {
		return nil
	}
	return &lc
}
