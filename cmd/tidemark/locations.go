package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"tidemark/lake/store"
)

// locationFlags hold a lake, checkpoint or source location.
var locationFlags = []string{"lake", "source", "checkpoint"}

// refuseLocationCredentials runs before every command: a location written
// as s3://key:secret@bucket/... is refused, showing it as s3://***@bucket/...
// Such a value would otherwise be echoed by every error and log line that
// names the location (and stored as raw_events.source); the S3 endpoint gets
// the same rule in lake/store. A bucket name never holds "@" or ":".
func refuseLocationCredentials(c *cli.Context) error {
	for _, f := range c.Command.Flags {
		name := f.Names()[0]
		if !slices.Contains(locationFlags, name) {
			continue
		}
		values := []string{c.String(name)}
		if _, ok := f.(*cli.StringSliceFlag); ok {
			values = c.StringSlice(name)
		}
		for _, v := range values {
			rest, ok := strings.CutPrefix(v, "s3://")
			if bucket, _, _ := strings.Cut(rest, "/"); ok && strings.ContainsAny(bucket, "@:") {
				shown := store.RedactURL(v)
				if shown == v { // "s3://key:secret/..." without "@"
					_, after, _ := strings.Cut(rest, "/")
					shown = "s3://***/" + after
				}
				return fmt.Errorf("--%s %q: credentials in a location are refused (they show in ps, shell history and logs); set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY", name, shown)
			}
		}
	}
	return nil
}

// withLocationCheck makes refuseLocationCredentials run before each
// command's own Before.
func withLocationCheck(cmds []*cli.Command) []*cli.Command {
	for _, cmd := range cmds {
		before := cmd.Before
		cmd.Before = func(c *cli.Context) error {
			if err := refuseLocationCredentials(c); err != nil {
				return err
			}
			if before != nil {
				return before(c)
			}
			return nil
		}
	}
	return cmds
}
