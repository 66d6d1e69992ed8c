package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"tidemark"
)

func shardsCommand() *cli.Command {
	return &cli.Command{
		Name:  "shards",
		Usage: "list the streams (shards) writing to a lake: name, id, sources, watermark, last batch and commit, active or idle",
		Flags: append(lakeFlags(),
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, csv or json", EnvVars: env("format")},
		),
		Action: func(c *cli.Context) error {
			f, err := newRenderer(c.String("format"))
			if err != nil {
				return err
			}
			lk, err := openLake(c, true)
			if err != nil {
				return err
			}
			shards, err := lk.Shards(c.Context)
			if err != nil {
				return err
			}
			combined, hasCombined, err := lk.ShardWatermark(c.Context)
			if err != nil {
				return err
			}
			f.header([]string{"name", "id", "sources", "watermark", "last_batch", "last_commit", "state"})
			for _, s := range shards {
				wm, last, state := "", "", "active"
				if s.HasWatermark {
					wm = tidemark.FormatTime(s.Watermark)
				}
				if !s.LastCommit.IsZero() {
					last = tidemark.FormatTime(s.LastCommit.UnixMicro())
				}
				switch {
				case s.LastBatch < 0:
					state = "registered"
				case s.Idle:
					state = "idle"
				}
				f.row([]cell{strCell(s.Name), strCell(s.ID), strCell(strings.Join(s.Sources, " ")), strCell(wm),
					numCell(strconv.FormatInt(s.LastBatch, 10)), strCell(last), strCell(state)})
			}
			if hasCombined && len(shards) > 1 {
				fmt.Fprintln(c.App.ErrWriter, "combined watermark (lowest active shard):", tidemark.FormatTime(combined))
			}
			return f.flush(c.App.Writer)
		},
	}
}
