package tidemark

import (
	"runtime/debug"
	"strings"
	"sync"
)

// Version is tidemark's release version, a semantic version: what
// `tidemark --version` prints and what every Parquet file tidemark writes
// names in its created_by. A release build sets it with
// -ldflags "-X tidemark.Version=1.2.3".
var Version = "0.1.0-dev"

// BuildID names the build: set with -ldflags "-X tidemark.BuildID=...", or
// else the VCS commit Go stamped into the binary (vcs.revision, with
// "-dirty" for a modified tree). "" when neither is known (go test, or
// -buildvcs=false).
var BuildID = ""

var buildOnce = sync.OnceValue(func() string {
	if BuildID != "" {
		return BuildID
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev != "" && dirty {
		rev += "-dirty"
	}
	return rev
})

// Build returns the build id (see BuildID), "" when unknown.
func Build() string { return buildOnce() }

// CreatedBy is the created_by of the Parquet files tidemark writes, in the
// form parquet-mr's VersionParser reads ("<app> version <semver> (build
// <hash>)", as parquet-mr itself writes it): "tidemark version 0.1.0
// (build 1f2e3d...)", with "unknown" for a build without an id.
func CreatedBy() string { return createdBy(Version, Build()) }

func createdBy(version, build string) string {
	if build == "" {
		build = "unknown"
	}
	return "tidemark version " + createdByPart.Replace(version) + " (build " + createdByPart.Replace(build) + ")"
}

// createdByPart keeps a version or build set at link time from breaking the
// created_by grammar: parentheses and blanks delimit its parts.
var createdByPart = strings.NewReplacer("(", "-", ")", "-", " ", "-", "\t", "-", "\n", "-")
