package delta

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"path"
	"slices"
	"strconv"

	"tidemark/lake/store"
)

// LogRepair is what RepairLog found in a table's log, and set aside.
type LogRepair struct {
	Latest int64 // the newest version the log held, -1 for none
	// Restored is the version the table reads at once repaired (-1: none
	// can be read).
	Restored int64
	// Base is the checkpoint the state is rebuilt from, -1 for none (the
	// commits from version 0).
	Base int64
	// BadCheckpoints are checkpoints that cannot be read; they are set
	// aside (the commits they summarise are still there, so nothing is
	// lost with them).
	BadCheckpoints []int64
	// Lost are the versions set aside: the first commit that cannot be
	// read (Damaged) or is missing, and every version after it, since a
	// Delta log has no gaps.
	Lost    []int64
	Damaged []int64
	// LostAdds are the data files the lost, readable versions added: their
	// rows are no longer in the table (re-ingest them; vacuum deletes the
	// files later). LostRemoves are files they removed, which are back.
	// A damaged commit's actions are unknown.
	LostAdds, LostRemoves []string
	// LostTxns gives, per application id, the txn version the lost commits
	// had recorded and the one the table is back at (-1: none).
	LostTxns map[string][2]int64
	// LastCheckpoint is set when _last_checkpoint is unreadable or names
	// another checkpoint than Base: it is rewritten (or removed).
	LastCheckpoint string
	// Moved are the log keys set aside, each under _delta_log/_damaged/.
	Moved []string
}

// NeedsRepair reports whether the log needs a repair.
func (r *LogRepair) NeedsRepair() bool {
	return len(r.BadCheckpoints) > 0 || len(r.Lost) > 0 || r.LastCheckpoint != ""
}

// RepairLog checks that the table's newest state can be read: the newest
// readable checkpoint, then every commit after it. A checkpoint that does
// not read is set aside; the first commit after the base that does not
// read (or is missing) and every version after it are set aside too, and
// reported with what they held; _last_checkpoint is made to name the base.
// Nothing is guessed: what is set aside is moved under
// _delta_log/_damaged/, not deleted. With dryRun nothing changes. A table
// whose state cannot be rebuilt at all (no readable checkpoint and the
// commits from 0 gone) is an error.
func (t *Table) RepairLog(ctx context.Context, dryRun bool) (*LogRepair, error) {
	l, err := t.listLog(ctx, 0)
	if err != nil {
		return nil, err
	}
	rep := &LogRepair{Latest: l.latest, Restored: -1, Base: -1, LostTxns: map[string][2]int64{}}
	if l.latest < 0 {
		return rep, fmt.Errorf("repair %s: %w", t.path, ErrNoTable)
	}
	cps := slices.Sorted(maps.Keys(l.checkpoints))
	var base *state
	for i := len(cps) - 1; i >= 0; i-- {
		s, err := t.readCheckpoint(ctx, cps[i], l.checkpoints[cps[i]])
		if err == nil {
			base, rep.Base = s, cps[i]
			break
		}
		rep.BadCheckpoints = append(rep.BadCheckpoints, cps[i])
	}
	if base == nil {
		if _, ok := l.commits[0]; !ok {
			return rep, fmt.Errorf("repair %s: no checkpoint can be read and commit 0 is gone (log retention): the state cannot be rebuilt from this log", t.path)
		}
		base = newState()
	}
	firstLost := int64(-1)
	for v := base.version + 1; v <= l.latest; v++ {
		key, ok := l.commits[v]
		if !ok {
			firstLost = v
			break
		}
		actions, err := t.readCommit(ctx, key)
		if err != nil {
			firstLost = v
			break
		}
		for _, a := range actions {
			base.apply(a)
		}
		base.version = v
	}
	rep.Restored = base.version
	if firstLost >= 0 {
		for v := firstLost; v <= l.latest; v++ {
			key, ok := l.commits[v]
			if !ok {
				if _, cp := l.checkpoints[v]; !cp {
					continue // a gap: nothing to set aside
				}
			}
			rep.Lost = append(rep.Lost, v)
			if !ok {
				continue
			}
			actions, err := t.readCommit(ctx, key)
			if err != nil {
				rep.Damaged = append(rep.Damaged, v)
				continue
			}
			for _, a := range actions {
				switch {
				case a.Add != nil:
					rep.LostAdds = append(rep.LostAdds, a.Add.Path)
				case a.Remove != nil:
					rep.LostRemoves = append(rep.LostRemoves, a.Remove.Path)
				case a.Txn != nil:
					had := base.txns[a.Txn.AppID]
					back := int64(-1)
					if _, ok := base.txns[a.Txn.AppID]; ok {
						back = had.Version
					}
					rep.LostTxns[a.Txn.AppID] = [2]int64{a.Txn.Version, back}
				}
			}
		}
	}
	// _last_checkpoint must name the base (or be absent without one).
	raw, lcErr := store.ReadAll(ctx, t.st, t.logKey("_last_checkpoint"))
	var lc lastCheckpoint
	switch {
	case errors.Is(lcErr, fs.ErrNotExist):
		if rep.Base >= 0 && len(rep.BadCheckpoints) > 0 {
			rep.LastCheckpoint = "missing"
		}
	case lcErr != nil:
		return rep, fmt.Errorf("repair %s: read _last_checkpoint: %w", t.path, lcErr)
	case json.Unmarshal(raw, &lc) != nil:
		rep.LastCheckpoint = "unreadable"
	case lc.Version != rep.Base:
		rep.LastCheckpoint = fmt.Sprintf("names version %d, the newest readable checkpoint is %d", lc.Version, rep.Base)
	}
	if dryRun || !rep.NeedsRepair() {
		return rep, nil
	}
	// Set aside newest first, so the log has no gap at any moment.
	var doomed []string
	for i := len(rep.Lost) - 1; i >= 0; i-- {
		v := rep.Lost[i]
		doomed = append(doomed, l.checkpoints[v]...)
		if key, ok := l.commits[v]; ok {
			doomed = append(doomed, key)
		}
	}
	for _, v := range rep.BadCheckpoints {
		if !slices.Contains(rep.Lost, v) {
			doomed = append(doomed, l.checkpoints[v]...)
		}
	}
	stamp := strconv.FormatInt(t.opts.Clock().UnixMilli(), 10)
	for _, key := range doomed {
		data, err := store.ReadAll(ctx, t.st, key)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return rep, fmt.Errorf("repair %s: read %s: %w", t.path, key, err)
		}
		if err == nil {
			aside := t.logKey("_damaged/" + stamp + "-" + path.Base(key))
			if err := t.st.Put(ctx, aside, bytes.NewReader(data), int64(len(data))); err != nil {
				return rep, fmt.Errorf("repair %s: set aside %s: %w", t.path, key, err)
			}
		}
		if err := t.st.Delete(ctx, key); err != nil {
			return rep, fmt.Errorf("repair %s: delete %s: %w", t.path, key, err)
		}
		rep.Moved = append(rep.Moved, key)
	}
	if rep.LastCheckpoint != "" || len(rep.BadCheckpoints) > 0 {
		if rep.Base < 0 {
			if err := t.st.Delete(ctx, t.logKey("_last_checkpoint")); err != nil {
				return rep, fmt.Errorf("repair %s: %w", t.path, err)
			}
		} else {
			s, err := t.readCheckpoint(ctx, rep.Base, l.checkpoints[rep.Base])
			if err != nil {
				return rep, fmt.Errorf("repair %s: %w", t.path, err)
			}
			n := int64(2 + len(s.txns) + len(s.files) + len(s.tombstones))
			doc, _ := json.Marshal(lastCheckpoint{Version: rep.Base, Size: n, NumOfAddFiles: int64(len(s.files))})
			if err := t.st.Put(ctx, t.logKey("_last_checkpoint"), bytes.NewReader(doc), int64(len(doc))); err != nil {
				return rep, fmt.Errorf("repair %s: write _last_checkpoint: %w", t.path, err)
			}
		}
	}
	t.mu.Lock()
	t.cached = nil // the cache may hold a state of a version set aside
	t.mu.Unlock()
	return rep, nil
}
