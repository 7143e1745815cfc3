package main

import (
	"strings"
	"testing"
	"time"

	gocql "github.com/apache/cassandra-gocql-driver/v2"
)

func TestReplicationMap(t *testing.T) {
	got, err := replicationMap("dc1:2, dc2:3")
	if want := "{'class': 'NetworkTopologyStrategy', 'dc1': 2, 'dc2': 3}"; err != nil || got != want {
		t.Errorf("replicationMap = %q, %v; want %q", got, err, want)
	}
	for _, bad := range []string{"dc1:2", "dc1:2,dc2", "dc1:0,dc2:2", "dc1:x,dc2:2", "dc'1:2,dc2:2", ""} {
		if _, err := replicationMap(bad); err == nil {
			t.Errorf("replicationMap(%q) = nil error, want one", bad)
		}
	}
}

func TestPrintSerialTable(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		var d []time.Duration
		for _, n := range ns {
			d = append(d, time.Duration(n)*time.Millisecond)
		}
		return d
	}
	lwt := []*lwtTimes{{d: ms(1, 1, 2, 4)}, {d: ms(2, 2, 4, 8)}}
	var b strings.Builder
	printSerialTable(&b, []gocql.Consistency{gocql.LocalSerial, gocql.Serial}, [][]time.Duration{ms(2, 2, 3, 5), ms(4, 4, 6, 10)}, lwt)
	out := b.String()
	for _, want := range []string{
		"LOCAL_SERIAL         4    2.00 ms    5.00 ms    3.00 ms",
		"SERIAL               4    4.00 ms   10.00 ms    6.00 ms",
		"SERIAL/LOCAL                 2.00       2.00       2.00",
		"claim LWT alone",
		"LOCAL_SERIAL         4    1.00 ms    4.00 ms    2.00 ms",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}
