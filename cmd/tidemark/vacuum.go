package main

import (
	"fmt"

	"github.com/urfave/cli/v2"

	"tidemark/lake"
)

func vacuumCommand() *cli.Command {
	return &cli.Command{
		Name:  "vacuum",
		Usage: "delete data files that no table version within the retention references",
		Flags: append(lakeFlags(),
			&cli.DurationFlag{Name: "retain", Value: lake.SafeRetention, Usage: "keep files needed by versions newer than this (time travel window)", EnvVars: env("retain")},
			&cli.BoolFlag{Name: "force", Usage: "accept a --retain under 168h (files younger than the 1h writer grace are kept even then)", EnvVars: env("force")},
			&cli.BoolFlag{Name: "dry-run", Usage: "list what would be deleted, delete nothing", EnvVars: env("dry-run")},
		),
		Action: func(c *cli.Context) error {
			lk, err := openLake(c, false)
			if err != nil {
				return err
			}
			rep, err := lk.Vacuum(c.Context, lake.VacuumOptions{Retain: c.Duration("retain"), Force: c.Bool("force"), DryRun: c.Bool("dry-run")})
			if err != nil {
				return err
			}
			verb := "deleted"
			if rep.DryRun {
				verb = "would delete"
			}
			for _, k := range rep.Deleted {
				fmt.Fprintf(c.App.Writer, "%s %s\n", verb, k)
			}
			fmt.Fprintf(c.App.Writer, "%s %d files, %d bytes\n", verb, rep.FilesRemoved, rep.BytesRemoved)
			if rep.InFlight > 0 {
				fmt.Fprintf(c.App.Writer, "kept %d files no version references yet: younger than the %s writer grace, they may belong to a writer in flight\n", rep.InFlight, lake.DefaultWriterGrace)
			}
			return nil
		},
	}
}
