#!/usr/bin/env bash
# Prints, for each top-level test that failed in a `go test -v` log, the
# last lines of its whole output: test-e2e shows only the test's own log
# lines while it runs, and an orderd process's output (why it exited, what
# it logged) is indented text that filter drops. Usage: e2e-failures.sh LOG
set -euo pipefail
log=${1:?usage: e2e-failures.sh LOG}
keep=${E2E_FAILURE_LINES:-150}
awk -v keep="$keep" '
	function flush(name) {
		if (!(name in failed) || !(name in count)) return
		n = count[name]
		from = n > keep ? n - keep + 1 : 1
		printf "=== output of %s (%d lines, the last %d) ===\n", name, n, n - from + 1
		for (i = from; i <= n; i++) print lines[name, i]
	}
	/^=== (RUN|CONT|PAUSE)   / {
		split($3, parts, "/"); cur = parts[1]
	}
	/^--- FAIL: / { failed[$3] = 1 }
	/^(FAIL|PASS|ok)([ \t]|$)/ { cur = "" }
	cur != "" { lines[cur, ++count[cur]] = $0 }
	END { for (name in failed) flush(name) }
' "$log"
