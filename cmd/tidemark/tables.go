package main

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/urfave/cli/v2"

	"tidemark/lake"
	"tidemark/reconcile"
)

func tablesCommand() *cli.Command {
	return &cli.Command{
		Name:  "tables",
		Usage: "show each table of a lake: Delta version, files, rows and bytes",
		Description: "With --spark, prints instead the variables scripts/spark/reconcile.sql needs for the lake, one `-d 'name=value'` " +
			"per line, shell-quoted and continued with a backslash: `eval \"set -- $(tidemark tables --lake L --spark)\"` then `spark-sql ... \"$@\" -d from_ts=... -d to_ts=... -f reconcile.sql` " +
			"(scripts/spark/README.md). A session lake is refused: the script handles window lakes only.",
		Flags: append(lakeFlags(),
			&cli.StringFlag{Name: "format", Value: "table", Usage: "table, csv or json", EnvVars: env("format")},
			&cli.BoolFlag{Name: "spark", Usage: "print the spark-sql -d variables of scripts/spark/reconcile.sql for this lake (window, slide, closing watermark, run sequence, keys, column names)"},
			shardIdleFlag(),
		),
		Action: func(c *cli.Context) error {
			if c.Bool("spark") {
				return printSparkVariables(c)
			}
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

// printSparkVariables is tables --spark: the lake's location (s3:// as
// Spark's s3a://) and reconcile.SparkVariables, one shell-quoted -d a line,
// each but the last continued with a backslash: one shell command's
// arguments, for eval "set -- $(...)" or a paste.
func printSparkVariables(c *cli.Context) error {
	idle, err := shardIdle(c)
	if err != nil {
		return err
	}
	lk, err := openLakeWith(c, true, lake.Config{ShardIdle: idle})
	if err != nil {
		return err
	}
	vars, err := reconcile.SparkVariables(c.Context, lk)
	if err != nil {
		return err
	}
	loc := c.String("lake")
	if rest, ok := strings.CutPrefix(loc, "s3://"); ok {
		loc = "s3a://" + rest
	}
	vars = append([]reconcile.SparkVariable{{Name: "lake", Value: strings.TrimSuffix(loc, "/")}}, vars...)
	for i, v := range vars {
		cont := " \\"
		if i == len(vars)-1 {
			cont = ""
		}
		if _, err := fmt.Fprintf(c.App.Writer, "-d %s%s\n", shellQuote(v.Name+"="+v.Value), cont); err != nil {
			return err
		}
	}
	return nil
}

// shellQuote quotes s for a POSIX shell: in single quotes, each single
// quote closed, escaped and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
