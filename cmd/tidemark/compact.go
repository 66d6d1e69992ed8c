package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"tidemark/lake"
)

func compactCommand() *cli.Command {
	return &cli.Command{
		Name:  "compact",
		Usage: "merge small files of each partition (a dataChange=false commit; readers see the same rows)",
		Flags: append(lakeFlags(),
			&cli.StringSliceFlag{Name: "table", Usage: "table to compact; repeatable (default: all)", EnvVars: env("table")},
			&cli.Int64Flag{Name: "target-file-bytes", Value: 128 << 20, Usage: "files smaller than this are merged, up to about this size", EnvVars: env("target-file-bytes")},
		),
		Action: func(c *cli.Context) error {
			lk, err := openLake(c, false)
			if err != nil {
				return err
			}
			tables := c.StringSlice("table")
			if len(tables) == 0 {
				tables = []string{lake.TableRawEvents, lake.TableQuarantine, lake.TableWindowResults, lake.TableReconcileLog}
			}
			for _, t := range tables {
				rep, err := lk.Compact(c.Context, t, c.Int64("target-file-bytes"))
				if err != nil {
					return err
				}
				fmt.Fprintf(c.App.Writer, "%s: merged %d files (%d rows, %d bytes) into %d files (%d bytes)%s\n",
					t, rep.FilesRemoved, rep.Rows, rep.BytesRemoved, rep.FilesAdded, rep.BytesAdded, versionNote(rep.Version))
			}
			return nil
		},
	}
}

func versionNote(v int64) string {
	if v < 0 {
		return "; nothing to do"
	}
	return fmt.Sprintf("; version %d", v)
}
