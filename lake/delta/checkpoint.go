package delta

import (
	"context"
	"fmt"
)

// readCheckpoint loads the state stored in a checkpoint's parts.
func (t *Table) readCheckpoint(ctx context.Context, version int64, keys []string) (*state, error) {
	return nil, fmt.Errorf("read checkpoint %d: not implemented", version)
}

// writeCheckpoint writes a classic single-file checkpoint of s and
// _last_checkpoint.
func (t *Table) writeCheckpoint(ctx context.Context, s *state) error {
	return fmt.Errorf("write checkpoint %d: not implemented", s.version)
}
