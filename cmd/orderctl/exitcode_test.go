package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/atlasmart/orderd/proto/client"
)

func TestExitCodeOfEveryKindOfError(t *testing.T) {
	kind := func(k error) error { return &client.Error{Kind: k, Code: codes.Unknown} }
	for _, c := range []struct {
		name string
		err  error
		want int
	}{
		{"nil", nil, exitOK},
		{"anything else", errors.New("boom"), exitInternal},
		{"unexpected answer", kind(client.ErrUnexpected), exitInternal},
		{"usage", usageErr(errors.New("bad flag")), exitUsage},
		{"invalid", kind(client.ErrInvalid), exitInvalid},
		{"not found", kind(client.ErrNotFound), exitNotFound},
		{"conflict", kind(client.ErrConflict), exitRefused},
		{"stale", kind(client.ErrStale), exitRefused},
		{"rejected", kind(client.ErrRejected), exitRefused},
		{"failed", kind(client.ErrFailed), exitRefused},
		{"unavailable", kind(client.ErrUnavailable), exitRetry},
		{"outcome unknown", kind(client.ErrOutcomeUnknown), exitRetry},
		{"denied", kind(client.ErrDenied), exitDenied},
		{"wrapped", fmt.Errorf("request x: %w", kind(client.ErrDenied)), exitDenied},
		{"replay of a PENDING request", &stateError{kind: errPending, requestID: "x"}, exitRetry},
		{"replay of a FAILED request", &stateError{kind: client.ErrFailed, requestID: "x"}, exitRefused},
		{"verify problems", fmt.Errorf("%w: 1 of 2", errProblems), exitProblems},
	} {
		if got := exitCode(c.err); got != c.want {
			t.Errorf("%s: exit code %d, want %d", c.name, got, c.want)
		}
	}
}

func TestExitCodeHelpListsEveryCode(t *testing.T) {
	help := exitCodeHelp()
	for code := exitOK; code <= exitProblems; code++ {
		if !strings.Contains(help, fmt.Sprintf("\n  %d  ", code)) && !strings.HasPrefix(help, fmt.Sprintf("  %d  ", code)) {
			t.Errorf("exit code %d missing from:\n%s", code, help)
		}
	}
}

// Mistakes cobra catches, and orderctl's own input checks, exit 2 before
// any call (the address is one nothing listens on).
func TestUsageMistakesExit2WithoutACall(t *testing.T) {
	for _, args := range [][]string{
		{"bogus"},
		{"get"},
		{"get", "a", "b"},
		{"get", "--nope", "x"},
		{"create", "--customer", "c"},
		{"create", "--customer", "c", "--total", "1", "--currency", "EUR", "--line", "sku-only"},
		{"requests", "--state", "complete"},
		{"verify", "--requests", "/nonexistent/file"},
		{"list", "--customer", "c", "--page-size", "many"},
		{"get", "x", "--timeout", "soon"},
		{"get", "x", "--plaintext", "--cert-file", "c.pem", "--key-file", "k.pem"},
	} {
		var stderr strings.Builder
		got := run(context.Background(), append(args, "--addr", "127.0.0.1:1"), io.Discard, &stderr)
		if got != exitUsage || !strings.Contains(stderr.String(), "orderctl: ") || !strings.Contains(stderr.String(), "--help") {
			t.Errorf("orderctl %v: exit %d, stderr %q; want %d and the usage hint", args, got, stderr.String(), exitUsage)
		}
	}
}
