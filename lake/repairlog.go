package lake

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"tidemark/lake/delta"
	"tidemark/lake/store"
)

// LogRepairReport is one table's log check (see delta.Table.RepairLog).
type LogRepairReport struct {
	Table string
	delta.LogRepair
}

// RepairLogs checks the Delta log of each table (default: all) and, unless
// dryRun, sets aside a damaged newest commit or checkpoint so the table
// reads again at the newest version that can be rebuilt; see
// delta.Table.RepairLog for exactly what is set aside and reported. It
// works on the store directly, as a lake with a damaged log cannot be
// opened. A table with no log is skipped.
func RepairLogs(ctx context.Context, st store.Store, tables []string, dryRun bool, clock func() time.Time) ([]LogRepairReport, error) {
	if len(tables) == 0 {
		tables = tableNames
	}
	var out []LogRepairReport
	for _, name := range tables {
		if !slices.Contains(tableNames, name) {
			return out, fmt.Errorf("repair: no table %q (have %s)", name, strings.Join(tableNames, ", "))
		}
		rep, err := delta.Open(st, name, delta.Options{Clock: clock}).RepairLog(ctx, dryRun)
		if errors.Is(err, delta.ErrNoTable) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, LogRepairReport{Table: name, LogRepair: *rep})
	}
	return out, nil
}
