package lake

import (
	"context"
	"fmt"
	"strconv"

	"tidemark/lake/delta"
)

// DefaultAutoCompactMinFiles is AutoCompactOptions.MinFiles' default: how
// many files of one size tier a partition gathers before they are merged.
const DefaultAutoCompactMinFiles = 16

// AutoCompactOptions configure AutoCompact. The zero value means the
// documented defaults.
type AutoCompactOptions struct {
	// MinFiles is how many small files of one size tier a partition must
	// hold before they are merged; 0 = DefaultAutoCompactMinFiles, at
	// least 2.
	MinFiles int
	// TargetFileBytes is the size merged files grow to; files of at least
	// half of it are left alone. 0 = DefaultTargetFileBytes.
	TargetFileBytes int64
}

func (o AutoCompactOptions) withDefaults() (AutoCompactOptions, error) {
	if o.MinFiles == 0 {
		o.MinFiles = DefaultAutoCompactMinFiles
	}
	if o.TargetFileBytes == 0 {
		o.TargetFileBytes = DefaultTargetFileBytes
	}
	if o.MinFiles < 2 {
		return o, fmt.Errorf("auto compaction: at least 2 files must be merged at a time, got %d", o.MinFiles)
	}
	if o.TargetFileBytes < 0 {
		return o, fmt.Errorf("auto compaction: negative target file size %d", o.TargetFileBytes)
	}
	return o, nil
}

// AutoCompact is the compaction a stream runs in the background, as
// Delta's auto compaction does: within each partition of table, the small
// files of one size tier are merged once there are MinFiles of them, in
// one dataChange=false OPTIMIZE commit (readers see the same rows).
//
// Size tiers keep the work proportional to what is written: a file's tier
// is how many times MinFiles would have to multiply its size to reach
// TargetFileBytes, so MinFiles batch files make one file of the next tier,
// MinFiles of those one of the next, and so on up to the target. Each row
// is rewritten about log_MinFiles(target / batch file size) times (twice at
// 2,000 lines/s with a 10 s trigger), where merging every small file each
// time would rewrite a growing file again and again. Files of at least half
// the target are never touched.
//
// It commits as Compact does, so it never races `tidemark compact`, another
// stream's auto compaction or a writer: only a commit removing the same
// files conflicts, and the attempt is redone on the newer version.
func (l *Lake) AutoCompact(ctx context.Context, tableName string, o AutoCompactOptions) (Report, error) {
	o, err := o.withDefaults()
	if err != nil {
		return Report{Table: tableName, Version: -1}, err
	}
	params := map[string]string{"auto": "true", "minNumFiles": strconv.Itoa(o.MinFiles)}
	return l.compact(ctx, tableName, o.TargetFileBytes, params, func(files []delta.Add) [][]delta.Add {
		return tierGroups(files, o.TargetFileBytes, o.MinFiles)
	})
}

// tierGroups picks, per partition and size tier, the groups AutoCompact
// merges: tiers with at least minFiles files, binned to target bytes.
func tierGroups(files []delta.Add, target int64, minFiles int) [][]delta.Add {
	var out [][]delta.Add
	for _, part := range byPartition(files, func(a delta.Add) bool { return a.Size < target/2 }) {
		tiers := map[int][]delta.Add{}
		top := 0
		for _, a := range part {
			t := sizeTier(a.Size, target, int64(minFiles))
			tiers[t] = append(tiers[t], a)
			top = max(top, t)
		}
		for t := 0; t <= top; t++ {
			if len(tiers[t]) >= minFiles {
				out = binGroups(out, tiers[t], target)
			}
		}
	}
	return out
}

// sizeTier is how many times size can be multiplied by factor and stay
// under target: 0 for files within a factor of the target, 1 for files
// factor times smaller, and so on.
func sizeTier(size, target, factor int64) int {
	t := 0
	for s := max(size, 1) * factor; s < target; s *= factor {
		t++
	}
	return t
}
