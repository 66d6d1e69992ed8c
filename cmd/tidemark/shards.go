package main

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"tidemark"
	"tidemark/lake"
)

// shardIdleFlag is --shard-idle of stream, reconcile and shards: all three
// decide which streams of a shared lake are idle, so they must be given the
// same value.
func shardIdleFlag() cli.Flag {
	return &cli.DurationFlag{Name: "shard-idle", Value: lake.DefaultShardIdle,
		Usage:   "on a lake several streams write: a stream whose last commit is more than D older than the newest one's is idle and no longer holds merged windows back from final (give stream, reconcile, shards and tables --spark the same D)",
		EnvVars: env("shard-idle")}
}

// shardIdle reads --shard-idle.
func shardIdle(c *cli.Context) (time.Duration, error) {
	d := c.Duration("shard-idle")
	if d <= 0 {
		return 0, fmt.Errorf("--shard-idle %s: want a positive duration", d)
	}
	return d, nil
}

func shardsCommand() *cli.Command {
	return &cli.Command{
		Name:  "shards",
		Usage: "list the streams (shards) writing to a lake: name, id, sources, watermark, last batch and commit, active or idle",
		Flags: append(lakeFlags(),
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, csv or json", EnvVars: env("format")},
			shardIdleFlag(),
		),
		Action: func(c *cli.Context) error {
			f, err := newRenderer(c.String("format"))
			if err != nil {
				return err
			}
			idle, err := shardIdle(c)
			if err != nil {
				return err
			}
			lk, err := openLakeWith(c, true, lake.Config{ShardIdle: idle})
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
