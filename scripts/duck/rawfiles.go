package main

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
)

// activeFiles replays the log of table under lake and returns the local
// paths of its active files.
func activeFiles(ctx context.Context, db *sql.DB, lake, table string) (*snapshot, []string, error) {
	s, err := replay(ctx, db, filepath.Join(lake, table))
	if err != nil {
		return nil, nil, fmt.Errorf("%s: %w", table, err)
	}
	paths := make([]string, 0, len(s.Files))
	for _, f := range s.Files {
		p, err := f.localPath(s.Root)
		if err != nil {
			return nil, nil, fmt.Errorf("%s: %w", table, err)
		}
		paths = append(paths, p)
	}
	if len(paths) == 0 {
		return nil, nil, fmt.Errorf("%s: no active files at version %d", table, s.Version)
	}
	return s, paths, nil
}
