package main

import (
	"strconv"

	"github.com/urfave/cli/v2"
)

func tablesCommand() *cli.Command {
	return &cli.Command{
		Name:  "tables",
		Usage: "show each table of a lake: Delta version, files, rows and bytes",
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
			infos, err := lk.Tables(c.Context)
			if err != nil {
				return err
			}
			f.header([]string{"table", "version", "files", "rows", "bytes"})
			for _, t := range infos {
				f.row([]cell{strCell(t.Name), numCell(strconv.FormatInt(t.Version, 10)), numCell(strconv.Itoa(t.Files)),
					numCell(strconv.FormatInt(t.Rows, 10)), numCell(strconv.FormatInt(t.Bytes, 10))})
			}
			return f.flush(c.App.Writer)
		},
	}
}
