package e2e

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Every binary in cmd/, and each of orderd's commands, answers -h and
// --help with its usage and exit code 0: what an operator tries first.
func TestEveryBinaryAnswersHelp(t *testing.T) {
	isolated(t)
	dir := t.TempDir()
	build := exec.Command("go", "build", "-o", dir+"/", "./cmd/...")
	build.Dir = repoRoot()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/...: %v\n%s", err, out)
	}
	entries, err := os.ReadDir(filepath.Join(repoRoot(), "cmd"))
	if err != nil {
		t.Fatal(err)
	}
	var calls [][]string
	for _, e := range entries {
		if e.IsDir() {
			calls = append(calls, []string{e.Name()})
		}
	}
	if len(calls) < 7 {
		t.Fatalf("only %d binaries in cmd/: %v", len(calls), calls)
	}
	for _, cmd := range []string{"serve", "migrate", "reconcile", "verify", "requeue", "republish", "copy-listing",
		"healthcheck", "keys", "keys add", "dev-setup", "version", "help"} {
		calls = append(calls, append([]string{"orderd"}, strings.Fields(cmd)...))
	}
	for _, call := range calls {
		for _, flag := range []string{"-h", "--help"} {
			args := append(call[1:len(call):len(call)], flag)
			cmd := exec.Command(filepath.Join(dir, call[0]), args...)
			var out bytes.Buffer
			cmd.Stdout, cmd.Stderr = &out, &out
			err := cmd.Run()
			name := strings.Join(append(call, flag), " ")
			var exit *exec.ExitError
			switch {
			case errors.As(err, &exit):
				t.Errorf("%s: exit code %d, want 0:\n%s", name, exit.ExitCode(), out.String())
			case err != nil:
				t.Errorf("%s: %v", name, err)
			case !strings.Contains(strings.ToLower(out.String()), "usage") || strings.Contains(out.String(), "unknown command"):
				t.Errorf("%s printed no usage:\n%s", name, out.String())
			}
		}
	}
	t.Logf("%d binaries and orderd's commands answered -h and --help with exit 0", len(calls))
}
