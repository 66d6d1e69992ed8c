package delta

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The log is bounded as Delta bounds it. Tombstones (remove actions) expire
// after delta.deletedFileRetentionDuration (default one week): a checkpoint
// leaves out those removed longer ago. At checkpoint time, the commits and
// checkpoints older than delta.logRetentionDuration (default 30 days) are
// deleted — but only below the newest checkpoint at or before that horizon,
// so every version from it on stays readable. delta.enableExpiredLogCleanup
// = false turns the log cleanup off. Ages are those of the log files'
// modification times, as Delta judges them.

// Table properties and defaults of the log's retention.
const (
	PropDeletedFileRetention = "delta.deletedFileRetentionDuration"
	PropLogRetention         = "delta.logRetentionDuration"
	PropExpiredLogCleanup    = "delta.enableExpiredLogCleanup"

	DefaultDeletedFileRetention = 7 * 24 * time.Hour
	DefaultLogRetention         = 30 * 24 * time.Hour
)

// ErrVersionExpired is the error of a snapshot of a version whose commits
// the log cleanup removed. It matches fs.ErrNotExist.
var ErrVersionExpired = &sentinel{msg: "delta: version older than the log retention", is: fs.ErrNotExist}

// ParseInterval parses a Delta interval property: "interval 7 days",
// "interval 1 week", "168 hours", "interval 2 days 12 hours" (units from
// nanosecond to week, singular or plural; "interval" optional,
// case-insensitive). Months and years are refused: they have no fixed
// length.
func ParseInterval(s string) (time.Duration, error) {
	f := strings.Fields(strings.ToLower(s))
	if len(f) > 0 && f[0] == "interval" {
		f = f[1:]
	}
	if len(f) == 0 || len(f)%2 != 0 {
		return 0, fmt.Errorf("interval %q: want \"interval <n> <unit>\"", s)
	}
	var total time.Duration
	for i := 0; i < len(f); i += 2 {
		n, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("interval %q: bad number %q", s, f[i])
		}
		var unit time.Duration
		switch strings.TrimSuffix(f[i+1], "s") {
		case "nanosecond":
			unit = time.Nanosecond
		case "microsecond":
			unit = time.Microsecond
		case "millisecond":
			unit = time.Millisecond
		case "second":
			unit = time.Second
		case "minute":
			unit = time.Minute
		case "hour":
			unit = time.Hour
		case "day":
			unit = 24 * time.Hour
		case "week":
			unit = 7 * 24 * time.Hour
		default:
			return 0, fmt.Errorf("interval %q: unit %q (want nanoseconds to weeks)", s, f[i+1])
		}
		if n > int64((1<<63-1)/unit) || total+time.Duration(n)*unit < total {
			return 0, fmt.Errorf("interval %q: too long", s)
		}
		total += time.Duration(n) * unit
	}
	return total, nil
}

// Retention is the log retention a table's configuration sets.
type Retention struct {
	DeletedFiles time.Duration // tombstones expire after it
	Log          time.Duration // log files older than it may be removed
	CleanupLog   bool          // delta.enableExpiredLogCleanup
}

// RetentionOf reads the retention properties of a table's configuration,
// the defaults for those absent. A property that does not parse is an
// error naming it (the table is then neither cleaned nor pruned).
func RetentionOf(conf map[string]string) (Retention, error) {
	r := Retention{DeletedFiles: DefaultDeletedFileRetention, Log: DefaultLogRetention, CleanupLog: true}
	for prop, dst := range map[string]*time.Duration{PropDeletedFileRetention: &r.DeletedFiles, PropLogRetention: &r.Log} {
		if v, ok := conf[prop]; ok {
			d, err := ParseInterval(v)
			if err != nil {
				return r, fmt.Errorf("table property %s: %w", prop, err)
			}
			*dst = d
		}
	}
	if v, ok := conf[PropExpiredLogCleanup]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return r, fmt.Errorf("table property %s: %q is not a boolean", PropExpiredLogCleanup, v)
		}
		r.CleanupLog = b
	}
	return r, nil
}

// liveTombstones returns the tombstones of s removed after cutoff (epoch
// ms): those a checkpoint keeps.
func liveTombstones(ts []Remove, cutoff int64) []Remove {
	return slices.DeleteFunc(ts, func(r Remove) bool { return r.DeletionTimestamp < cutoff })
}

// cleanupLog deletes the commits and checkpoints older than the log
// retention that no retained version needs: below the newest checkpoint
// whose file is at least the retention old, and themselves that old. It
// deletes oldest first, so a crash leaves a log that still starts at a
// checkpoint-readable version. It returns the files deleted.
func (t *Table) cleanupLog(ctx context.Context, retain time.Duration) (int, error) {
	cutoff := t.opts.Clock().Add(-retain)
	prefix := t.logKey("")
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	infos, err := t.st.List(ctx, prefix)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("list %s: %w", prefix, err)
	}
	l, err := t.listLog(ctx, 0)
	if err != nil {
		return 0, err
	}
	old := map[string]bool{} // keys at least the retention old
	for _, in := range infos {
		if !in.ModTime.After(cutoff) {
			old[in.Key] = true
		}
	}
	horizon := int64(-1) // newest checkpoint at or before the cutoff
	for v, keys := range l.checkpoints {
		if v > horizon && !slices.ContainsFunc(keys, func(k string) bool { return !old[k] }) {
			horizon = v
		}
	}
	if horizon <= 0 {
		return 0, nil
	}
	type doomed struct {
		v   int64
		key string
	}
	var del []doomed
	for v, key := range l.commits {
		if v < horizon && old[key] {
			del = append(del, doomed{v, key})
		}
	}
	for v, keys := range l.checkpoints {
		if v < horizon {
			for _, k := range keys {
				del = append(del, doomed{v, k})
			}
		}
	}
	slices.SortFunc(del, func(a, b doomed) int { return cmp.Compare(a.v, b.v) })
	for i, d := range del {
		if err := t.st.Delete(ctx, d.key); err != nil {
			return i, fmt.Errorf("delete expired log file %s: %w", d.key, err)
		}
	}
	return len(del), nil
}
