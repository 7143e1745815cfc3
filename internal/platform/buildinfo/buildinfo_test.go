package buildinfo

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/prometheus/common/version"
)

func TestUnstampedBuildReportsTheModuleVersion(t *testing.T) {
	if Version() == "" {
		t.Fatal("Version is empty: an unstamped build must report the toolchain's module version")
	}
	if !strings.HasPrefix(Text(), "orderd "+Version()+"\n") {
		t.Errorf("Text() = %q, want its first line to be %q", Text(), "orderd "+Version())
	}
}

func TestBuildInfoMetricCarriesTheStampedValues(t *testing.T) {
	old, oldRev := version.Version, version.Revision
	t.Cleanup(func() { version.Version, version.Revision = old, oldRev })
	version.Version, version.Revision = "v1.2.3", "abc123"

	reg := prometheus.NewRegistry()
	reg.MustRegister(Collector())
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	if len(families) != 1 || families[0].GetName() != "orderd_build_info" {
		t.Fatalf("gathered %v, want one family orderd_build_info", families)
	}
	labels := map[string]string{}
	for _, l := range families[0].GetMetric()[0].GetLabel() {
		labels[l.GetName()] = l.GetValue()
	}
	if labels["version"] != "v1.2.3" || labels["revision"] != "abc123" {
		t.Errorf("labels = %v, want version v1.2.3 and revision abc123", labels)
	}
	if got := testutil.ToFloat64(Collector()); got != 1 {
		t.Errorf("orderd_build_info = %v, want 1", got)
	}
	if LogAttrs()[1] != "v1.2.3" {
		t.Errorf("LogAttrs() = %v, want the stamped version", LogAttrs())
	}
}
