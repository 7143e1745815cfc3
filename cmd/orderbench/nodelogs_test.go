package main

import (
	"os"
	"path/filepath"
	"testing"
)

func TestNodeLogsCountOnlyTombstoneLinesWrittenAfterTheStart(t *testing.T) {
	dir := t.TempDir()
	log := filepath.Join(dir, "node1", "logs", "system.log")
	if err := os.MkdirAll(filepath.Dir(log), 0o755); err != nil {
		t.Fatal(err)
	}
	before := "WARN Read 0 live rows and 2001 tombstone cells for query SELECT * FROM ks.pending_requests (before the run)\n"
	if err := os.WriteFile(log, []byte(before), 0o644); err != nil {
		t.Fatal(err)
	}
	w := watchNodeLogs(filepath.Join(dir, "node*", "logs", "system.log"))
	f, err := os.OpenFile(log, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("INFO Node configuration:[tombstone_warn_threshold=1000]\nWARN Read 10 live rows and 1500 Tombstone cells for query SELECT ...\nINFO flushed\n")
	f.Close()

	got := w.tombstoneWarnings()
	if len(got) != 1 || got[0] != "node1: WARN Read 10 live rows and 1500 Tombstone cells for query SELECT ..." {
		t.Errorf("tombstoneWarnings = %q, want the one line written after the start, named by its node", got)
	}
	if len(w.start) != 1 {
		t.Errorf("watched %d logs, want 1", len(w.start))
	}
}
