package main

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// nodeLogs watches the Cassandra nodes' system logs for tombstone warnings
// ("Read N live rows and M tombstone cells ...", "Scanned over M
// tombstones ..."), counting only what is written after it starts: the due
// queue's reads must meet none at the benchmark's rate.
type nodeLogs struct {
	start map[string]int64 // file -> size when the run started
}

// watchNodeLogs notes where each log matching glob ends now.
func watchNodeLogs(glob string) *nodeLogs {
	files, _ := filepath.Glob(glob)
	n := &nodeLogs{start: map[string]int64{}}
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			n.start[f] = st.Size()
		}
	}
	return n
}

// tombstoneWarnings returns the lines about tombstones written since the
// watch started, in every watched log.
func (n *nodeLogs) tombstoneWarnings() []string {
	var out []string
	for f, off := range n.start {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		if _, err := fh.Seek(off, io.SeekStart); err == nil {
			sc := bufio.NewScanner(fh)
			sc.Buffer(make([]byte, 64*1024), 1024*1024)
			for sc.Scan() {
				line := sc.Text()
				// WARN (tombstone_warn_threshold) or ERROR (the failure
				// threshold); a node's start logs its configuration, which
				// names the thresholds, at INFO.
				if (strings.HasPrefix(line, "WARN") || strings.HasPrefix(line, "ERROR")) &&
					strings.Contains(strings.ToLower(line), "tombstone") {
					out = append(out, filepath.Base(filepath.Dir(filepath.Dir(f)))+": "+line)
				}
			}
		}
		fh.Close()
	}
	return out
}
