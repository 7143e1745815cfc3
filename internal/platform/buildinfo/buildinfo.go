// Package buildinfo says which build of orderd is running, for `orderd
// version`, the start-up log line and the orderd_build_info metric.
//
// The values live in github.com/prometheus/common/version, the package the
// Prometheus ecosystem stamps with -ldflags -X (the Makefile and Dockerfile
// set Version, Revision and Branch there), so the metric comes from
// client_golang's own build-info collector instead of a copy of it here.
// A binary built without those flags (go build, go install) reports the
// module version and VCS revision the Go toolchain recorded, when it did.
package buildinfo

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	versioncollector "github.com/prometheus/client_golang/prometheus/collectors/version"
	"github.com/prometheus/common/version"
)

// Program names the binary in the metric (orderd_build_info) and the text.
const Program = "orderd"

func init() {
	if version.Version == "" {
		version.Version = moduleVersion()
	}
}

// moduleVersion is the main module's version as the toolchain recorded it:
// "v1.2.3" for go install ...@v1.2.3, "(devel)" for a build in a checkout.
func moduleVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || bi.Main.Version == "" {
		return "(devel)"
	}
	return bi.Main.Version
}

// Version is the release this binary was built from.
func Version() string { return version.Version }

// Revision is the VCS commit ("unknown" when none was stamped or recorded).
func Revision() string { return version.GetRevision() }

// Text is what `orderd version` prints: the version on the first line, then
// what a bug report needs (prometheus/common's Print also lists a build user
// and date, which reproducible builds leave empty).
func Text() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s\n", Program, version.Version)
	fmt.Fprintf(&b, "  revision: %s\n", version.GetRevision())
	if version.Branch != "" {
		fmt.Fprintf(&b, "  branch:   %s\n", version.Branch)
	}
	fmt.Fprintf(&b, "  go:       %s %s/%s\n", version.GoVersion, version.GoOS, version.GoArch)
	if tags := version.GetTags(); tags != "unknown" && tags != "" {
		fmt.Fprintf(&b, "  tags:     %s\n", tags)
	}
	return b.String()
}

// LogAttrs are the key/value pairs of the start-up log line.
func LogAttrs() []any {
	return []any{"version", version.Version, "revision", version.GetRevision(), "go", version.GoVersion}
}

// Collector exports orderd_build_info{version,revision,branch,goversion,...} 1.
func Collector() prometheus.Collector { return versioncollector.NewCollector(Program) }
