package main

import (
	"slices"
	"testing"
)

func TestParseCostVariants(t *testing.T) {
	got, err := parseCostVariants("default; gogc:GOGC=400,GOMAXPROCS=1 ;other:orderd=/tmp/orderd-old,GOGC=200")
	if err != nil {
		t.Fatal(err)
	}
	want := []costVariant{
		{name: "default"},
		{name: "gogc", env: []string{"GOGC=400", "GOMAXPROCS=1"}},
		{name: "other", orderd: "/tmp/orderd-old", env: []string{"GOGC=200"}},
	}
	if !slices.EqualFunc(got, want, func(a, b costVariant) bool {
		return a.name == b.name && a.orderd == b.orderd && slices.Equal(a.env, b.env)
	}) {
		t.Errorf("parseCostVariants = %+v, want %+v", got, want)
	}
	if d, err := parseCostVariants(defaultCostVariants); err != nil || len(d) < 2 {
		t.Errorf("the default variants %q: %v, %d variants", defaultCostVariants, err, len(d))
	}
	for _, bad := range []string{"", "only", "a;a", "a;b:GOGC", "a;:GOGC=1"} {
		if _, err := parseCostVariants(bad); err == nil {
			t.Errorf("parseCostVariants(%q) accepted", bad)
		}
	}
}
