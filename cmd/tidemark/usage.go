package main

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/urfave/cli/v2"

	"tidemark"
)

// Usage errors are one line: what was wrong, what was probably meant, and
// where the help is. urfave/cli's own handling prints "Incorrect Usage"
// and the whole --help (60 lines for stream) with a bare
// "flag provided but not defined".

// withUsageErrors gives every command (and the app) the one-line usage
// error and an unknown-command error with a suggestion.
func withUsageErrors(app *cli.App) *cli.App {
	app.OnUsageError = usageError(app.Flags, "tidemark")
	var set func(prefix string, cmds []*cli.Command)
	set = func(prefix string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			name := prefix + " " + cmd.Name
			cmd.OnUsageError = usageError(cmd.Flags, name)
			set(name, cmd.Subcommands)
		}
	}
	set("tidemark", app.Commands)
	app.Action = func(c *cli.Context) error {
		if !c.Args().Present() {
			return cli.ShowAppHelp(c)
		}
		return unknownCommand(c.App.Commands, c.Args().First())
	}
	return app
}

var (
	undefinedFlag = regexp.MustCompile(`^flag provided but not defined: -+(.+)$`)
	invalidValue  = regexp.MustCompile(`^invalid value "(.*)" for flag -+([^:]+): (.*)$`)
)

// usageError is an OnUsageError: it rewrites the flag package's messages.
func usageError(flags []cli.Flag, command string) cli.OnUsageErrorFunc {
	return func(_ *cli.Context, err error, _ bool) error {
		msg := err.Error()
		see := fmt.Sprintf(" (see %s --help)", command)
		if m := undefinedFlag.FindStringSubmatch(msg); m != nil {
			name, _, _ := strings.Cut(m[1], "=")
			out := fmt.Sprintf("unknown flag --%s", name)
			if s := suggestFlag(flags, name); s != "" {
				out += fmt.Sprintf("; did you mean --%s?", s)
			}
			return fmt.Errorf("%s%s", out, see)
		}
		if m := invalidValue.FindStringSubmatch(msg); m != nil {
			return fmt.Errorf("--%s %q: %s%s", m[2], m[1], acceptedForm(flags, m[2]), see)
		}
		return fmt.Errorf("%w%s", err, see)
	}
}

// acceptedForm says what a flag's value must look like.
func acceptedForm(flags []cli.Flag, name string) string {
	for _, f := range flags {
		if !hasName(f, name) {
			continue
		}
		switch f.(type) {
		case *cli.DurationFlag:
			return "not a duration; use a Go duration like 1m, 90s, 1h30m (units ns, us, ms, s, m, h)"
		case *cli.IntFlag, *cli.Int64Flag, *cli.UintFlag, *cli.Uint64Flag:
			return "not a whole number; use digits only, e.g. 1048576"
		case *cli.Float64Flag:
			return "not a number, e.g. 0.5"
		case *cli.BoolFlag:
			return "not true or false"
		case *cli.TimestampFlag:
			return "not a time in the flag's layout"
		}
	}
	return "not a valid value"
}

func hasName(f cli.Flag, name string) bool {
	for _, n := range f.Names() {
		if n == name {
			return true
		}
	}
	return false
}

// flagSynonyms maps names people try, from other tools (Spark, Flink,
// Kafka, Vector) or from the concept, to tidemark's flag for it.
var flagSynonyms = map[string]string{
	"watermark": "lateness", "watermark-delay": "lateness", "allowed-lateness": "lateness",
	"max-lateness": "lateness", "delay": "lateness", "late": "lateness",
	"window-size": "window", "size": "window", "interval": "window", "tumble": "window",
	"input": "source", "in": "source", "dir": "source", "path": "source", "src": "source", "sources": "source",
	"output": "lake", "out": "lake", "dest": "lake", "sink": "lake", "table": "lake",
	"group-by": "key", "groupby": "key", "group": "key", "keys": "key", "partition-by": "key",
	"timestamp": "time-field", "timestamp-field": "time-field", "ts-field": "time-field", "ts": "time-field",
	"time-column": "time-field", "time-key": "time-field", "event-time": "time-field", "event-time-field": "time-field",
	"metric": "value", "measure": "value", "sum": "value", "values": "value", "value-field": "value",
	"unit": "time-unit", "epoch-unit": "time-unit",
	"layout": "time-layout", "time-format": "time-layout", "timestamp-format": "time-layout",
	"gap": "session-gap", "session": "session-gap", "session-timeout": "session-gap",
	"dryrun": "dry-run", "dry": "dry-run",
}

// suggestFlag returns the flag a misspelt or borrowed name most likely
// means, or "" when nothing is close.
func suggestFlag(flags []cli.Flag, name string) string {
	var names []string
	for _, f := range flags {
		names = append(names, f.Names()...)
	}
	return suggest(names, strings.ToLower(name), flagSynonyms)
}

// commandSynonyms maps words people try to tidemark's commands.
var commandSynonyms = map[string]string{
	"run": "stream", "start": "stream", "tail": "stream", "ingest": "stream", "follow": "stream",
	"fix": "reconcile", "correct": "reconcile", "batch": "reconcile",
	"replay": "requeue", "retry": "requeue", "reprocess": "requeue", "unquarantine": "requeue",
	"gc": "vacuum", "clean": "vacuum", "optimize": "compact", "merge": "compact",
}

// unknownCommand is the error for a first argument that is no command.
func unknownCommand(cmds []*cli.Command, name string) error {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Names()...)
		}
	}
	out := fmt.Sprintf("unknown command %q", name)
	if s := suggest(names, strings.ToLower(name), commandSynonyms); s != "" {
		out += fmt.Sprintf("; did you mean %q?", s)
	}
	return fmt.Errorf("%s (see tidemark --help)", out)
}

// suggest picks from names: a known synonym, else the unique name name is
// a prefix of, else the closest name within a small edit distance.
func suggest(names []string, name string, synonyms map[string]string) string {
	has := func(n string) bool {
		for _, x := range names {
			if x == n {
				return true
			}
		}
		return false
	}
	if s, ok := synonyms[name]; ok && has(s) {
		return s
	}
	var prefixed []string
	for _, n := range names {
		if len(name) >= 3 && strings.HasPrefix(n, name) {
			prefixed = append(prefixed, n)
		}
	}
	if len(prefixed) == 1 {
		return prefixed[0]
	}
	best, bestD := "", 1<<30
	for _, n := range names {
		if d := tidemark.EditDistance(n, name); d < bestD {
			best, bestD = n, d
		}
	}
	if bestD <= max(1, min(3, len(name)/3)) {
		return best
	}
	return ""
}
