package lwt_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/atlasmart/orderd/internal/domain/fault"
	"github.com/atlasmart/orderd/internal/platform/lwt"
)

// send is one scripted send: its response.
type send struct {
	applied bool
	found   string
	err     error
}

// read is one scripted settling read.
type read struct {
	row string
	err error
}

var (
	errUnknown = fault.New(fault.ReasonOutcomeUnknown, errors.New("write timeout"))
	errRefused = fault.New(fault.ReasonClusterUnavailable, errors.New("unavailable"))
	errRead    = fault.New(fault.ReasonClusterUnavailable, errors.New("read timeout"))
)

// TestDo runs every branch of the loop: each row is a script of sends and
// reads and what the caller must see, including how often each ran and
// what Observe heard.
func TestDo(t *testing.T) {
	for _, tc := range []struct {
		name     string
		sends    []send
		reads    []read
		want     lwt.Result[string]
		wantErr  error // errors.Is
		wantUnav bool  // an Unavailable error of the loop's own
		heard    string
	}{
		{name: "applied", sends: []send{{applied: true}}, want: lwt.Result[string]{Applied: true}},
		{name: "not applied: the row its condition found", sends: []send{{found: "other"}},
			want: lwt.Result[string]{State: "other"}},
		{name: "refused: definitely not applied, no read", sends: []send{{err: errRefused}}, wantErr: errRefused},
		{name: "unknown, read fails: still unknown", sends: []send{{err: errUnknown}}, reads: []read{{err: errRead}},
			wantErr: errUnknown, heard: "unsettled"},
		{name: "unknown, read shows it applied", sends: []send{{err: errUnknown}}, reads: []read{{row: "mine"}},
			want: lwt.Result[string]{Applied: true, State: "mine", Settled: true}, heard: "applied"},
		{name: "unknown, read shows it awaited: sent again, applied",
			sends: []send{{err: errUnknown}, {applied: true}}, reads: []read{{row: "awaiting"}},
			want: lwt.Result[string]{Applied: true}, heard: "not_applied"},
		{name: "unknown every time, awaited every time: Unavailable after the last send",
			sends:    []send{{err: errUnknown}, {err: errUnknown}, {err: errUnknown}},
			reads:    []read{{row: "awaiting"}, {row: "awaiting"}, {row: "awaiting"}},
			wantUnav: true, heard: "not_applied,not_applied,not_applied"},
		{name: "unknown, read shows another writer's row: not applied, settled",
			sends: []send{{err: errUnknown}}, reads: []read{{row: "other"}},
			want: lwt.Result[string]{State: "other", Settled: true}, heard: "not_applied"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sent, readN int
			var heard []string
			res, err := lwt.Do(context.Background(), lwt.Write[string]{
				Op: "test write",
				Send: func(context.Context) (bool, string, error) {
					s := tc.sends[sent]
					sent++
					return s.applied, s.found, s.err
				},
				Read: func(context.Context) (string, error) {
					r := tc.reads[readN]
					readN++
					return r.row, r.err
				},
				Applied: func(row string) bool { return row == "mine" },
				Awaits:  func(row string) bool { return row == "awaiting" },
				Observe: func(op string, o lwt.Outcome, cause error) {
					if op != "test write" || !errors.Is(cause, errUnknown) {
						t.Errorf("Observe(%q, %s, %v): want the write's op and the unknown outcome's error", op, o, cause)
					}
					heard = append(heard, string(o))
				},
			})
			switch {
			case tc.wantErr != nil && !errors.Is(err, tc.wantErr):
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			case tc.wantUnav && fault.KindOf(err) != fault.Unavailable:
				t.Fatalf("err = %v, want an Unavailable error", err)
			case tc.wantErr == nil && !tc.wantUnav && err != nil:
				t.Fatalf("err = %v, want none", err)
			}
			if err == nil && res != tc.want {
				t.Errorf("result = %+v, want %+v", res, tc.want)
			}
			if sent != len(tc.sends) || readN != len(tc.reads) {
				t.Errorf("%d sends and %d reads, want %d and %d", sent, readN, len(tc.sends), len(tc.reads))
			}
			if got := strings.Join(heard, ","); got != tc.heard {
				t.Errorf("Observe heard %q, want %q", got, tc.heard)
			}
		})
	}
}

// TestDoBoundsTheSends: Sends bounds the resends, and the error says how
// many went out.
func TestDoBoundsTheSends(t *testing.T) {
	for _, sends := range []int{1, 2, 5} {
		n := 0
		_, err := lwt.Do(context.Background(), lwt.Write[bool]{
			Op:     "bounded write",
			Send:   func(context.Context) (bool, bool, error) { n++; return false, false, errUnknown },
			Read:   func(context.Context) (bool, error) { return true, nil },
			Awaits: func(awaiting bool) bool { return awaiting },
			Sends:  sends,
		})
		if n != sends || fault.KindOf(err) != fault.Unavailable || !errors.Is(err, errUnknown) {
			t.Errorf("Sends %d: %d sends, err %v; want %d sends and an Unavailable error wrapping the unknown outcome", sends, n, err, sends)
		}
		if sends > 1 && !strings.Contains(err.Error(), fmt.Sprintf("in %d tries", sends)) {
			t.Errorf("Sends %d: error %q does not say how many tries", sends, err)
		}
	}
}
