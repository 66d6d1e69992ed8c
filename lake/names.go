package lake

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"path"
	"strings"
	"time"

	"tidemark/lake/store"
)

// Stream names are unique in a lake. A stream's rows carry its stream id
// (the txn appId of its commits, a UUID its checkpoint keeps), not its
// name, so two checkpoints under one --name are two streams to the lake:
// pointed at the same sources they read every line twice. The lake keeps
// one claim per name (namesDir/<name>.json: the stream id and checkpoint
// that own it), created only if absent, so of two streams starting
// together under one name exactly one gets it.

// namesDir holds one NameClaim per stream name (outside _shards/, whose
// records Shards reads).
const namesDir = "_stream_names/"

// ErrNameTaken is the error of ClaimName when the name is another
// stream's or another checkpoint's.
var ErrNameTaken = errors.New("lake: stream name taken")

// NameClaim says which stream owns a name in the lake.
type NameClaim struct {
	Name string `json:"name"`
	ID   string `json:"id"` // the stream id: the txn appId of its commits
	// Checkpoint is where the stream keeps its checkpoint: relative to the
	// lake ("<lake>/_checkpoints/x") when inside it, so a lake copied or
	// moved with its checkpoints keeps its claims; else as given.
	Checkpoint string    `json:"checkpoint"`
	Claimed    time.Time `json:"claimed"`
}

func nameKey(name string) string { return namesDir + url.PathEscape(name) + ".json" }

// ClaimName records that the stream c.ID, with its checkpoint at
// c.Checkpoint, owns c.Name in the lake. It succeeds when the name is free
// or already this stream's at this checkpoint (a restart). It fails with
// ErrNameTaken, naming the owner, when the name belongs to another stream
// (another checkpoint: its input would be read again), or to this stream
// at another checkpoint (a copy of the checkpoint, or a moved one). take
// claims the name anyway: for a checkpoint moved on purpose, or to replace
// a stream whose checkpoint is gone.
//
// A lake written before names were claimed has none: its shard records
// (RegisterShard) are looked through for the name instead.
func (l *Lake) ClaimName(ctx context.Context, c NameClaim, take bool) error {
	if c.Name == "" || c.ID == "" {
		return fmt.Errorf("claim stream name %q: name and stream id are required", c.Name)
	}
	c.Checkpoint = withoutUserinfo(c.Checkpoint)
	if c.Claimed.IsZero() {
		c.Claimed = l.clock().UTC()
	}
	data, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("claim stream name %q: %w", c.Name, err)
	}
	key := nameKey(c.Name)
	for attempt := 0; attempt < 2; attempt++ {
		owner, claimed, err := l.nameOwner(ctx, c.Name)
		if err != nil {
			return err
		}
		switch {
		case owner == nil || !claimed && owner.ID == c.ID: // free, or this stream's in a lake from before claims
			if err := l.st.PutIfAbsent(ctx, key, data); errors.Is(err, store.ErrExists) {
				continue // another stream claimed it meanwhile: look again
			} else if err != nil {
				return fmt.Errorf("claim stream name %q: %w", c.Name, err)
			}
			return nil
		case owner.ID == c.ID && owner.Checkpoint == c.Checkpoint:
			return nil
		case !take:
			return nameTaken(c, *owner, l.st.String())
		}
		if owner.ID != c.ID {
			l.log.Warn("taking over a stream name from another stream: input both read is read again", "name", c.Name,
				"stream_id", c.ID, "checkpoint", c.Checkpoint, "previous_stream_id", owner.ID, "previous_checkpoint", owner.Checkpoint)
		} else {
			l.log.Info("stream checkpoint moved", "name", c.Name, "stream_id", c.ID, "checkpoint", c.Checkpoint, "previous_checkpoint", owner.Checkpoint)
		}
		if err := l.st.Put(ctx, key, bytes.NewReader(data), int64(len(data))); err != nil {
			return fmt.Errorf("claim stream name %q: %w", c.Name, err)
		}
		return nil
	}
	return fmt.Errorf("claim stream name %q: it kept changing", c.Name)
}

// nameOwner returns the claim on name (claimed), or for a lake without one
// a claim built from the newest shard record of that name (nil when there
// is neither).
func (l *Lake) nameOwner(ctx context.Context, name string) (_ *NameClaim, claimed bool, _ error) {
	data, err := store.ReadAll(ctx, l.st, nameKey(name))
	switch {
	case err == nil:
		var c NameClaim
		if err := json.Unmarshal(data, &c); err != nil || c.ID == "" {
			return nil, false, fmt.Errorf("read the claim on stream name %q (%s): corrupt", name, nameKey(name))
		}
		return &c, true, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, false, fmt.Errorf("read the claim on stream name %q: %w", name, err)
	}
	infos, err := l.st.List(ctx, shardsDir)
	if err != nil {
		return nil, false, fmt.Errorf("list shards: %w", err)
	}
	var found *NameClaim
	for _, in := range infos {
		id, ok := strings.CutSuffix(path.Base(in.Key), ".json")
		if !ok {
			continue
		}
		data, err := store.ReadAll(ctx, l.st, in.Key)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, false, fmt.Errorf("read shard %s: %w", id, err)
		}
		var si ShardInfo
		if json.Unmarshal(data, &si) != nil || si.ID != id || si.Name != name {
			continue
		}
		if found == nil || si.Started.After(found.Claimed) {
			found = &NameClaim{Name: name, ID: si.ID, Checkpoint: si.Checkpoint, Claimed: si.Started}
		}
	}
	return found, false, nil
}

// nameTaken is ErrNameTaken with what the owner is and what to do; lake
// is the lake's location, for checkpoints recorded relative to it.
func nameTaken(c, owner NameClaim, lake string) error {
	where := owner.Checkpoint
	if where == "" {
		where = "unknown (registered before names were claimed)"
	}
	if rest, ok := strings.CutPrefix(where, "<lake>/"); ok {
		where = strings.TrimSuffix(lake, "/") + "/" + rest
	}
	if rest, ok := strings.CutPrefix(c.Checkpoint, "<lake>/"); ok {
		c.Checkpoint = strings.TrimSuffix(lake, "/") + "/" + rest
	}
	if owner.ID == c.ID {
		return fmt.Errorf("%w: stream %q (id %s) is recorded with its checkpoint at %s, and this run's checkpoint %s has the same stream id: a copy of that checkpoint. "+
			"Running both would commit the same batches twice over; if the stream moved here and the old checkpoint is no longer used, start it once with --take-name",
			ErrNameTaken, c.Name, c.ID, where, c.Checkpoint)
	}
	return fmt.Errorf("%w: the lake already has a stream named %q (id %s, checkpoint %s, since %s), and this run's checkpoint %s is another stream (id %s): "+
		"two streams on the same sources would put every line in the lake twice. Point --checkpoint at %s to run that stream, give this one another --name, "+
		"or, to replace that stream for good, --take-name",
		ErrNameTaken, c.Name, owner.ID, where, owner.Claimed.UTC().Format(time.RFC3339), c.Checkpoint, c.ID, where)
}
