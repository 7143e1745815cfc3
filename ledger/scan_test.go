package ledger

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"

	"github.com/google/uuid"
)

// A scan position round-trips, and a skip past a chunk is refused.
func TestScanPosition(t *testing.T) {
	for _, p := range []scanPosition{{}, {chunk: []byte("state"), skip: 7}, {chunk: []byte{0, 1, 2}, skip: ScanChunk - 1}} {
		got, err := decodeScanPosition(p.encode())
		if err != nil || got.skip != p.skip || string(got.chunk) != string(p.chunk) {
			t.Errorf("%+v: decoded %+v, %v", p, got, err)
		}
	}
	if _, err := decodeScanPosition(scanPosition{chunk: []byte("s"), skip: ScanChunk}.encode()); err == nil {
		t.Error("a skip of a whole chunk accepted")
	}
}

// chunkedLedger serves n rows in chunks of ScanChunk the way ScanChunk
// reads the table: a chunk's paging state is its first row's index, the
// last chunk returns none.
type chunkedLedger struct {
	rows  []Record
	reads int
}

func newChunkedLedger(n int, state func(i int) State) *chunkedLedger {
	l := &chunkedLedger{}
	for i := range n {
		l.rows = append(l.rows, Record{Key: Key{Tenant: "t", Operation: "CREATE_ORDER", RequestID: uuid.New()}, State: state(i), Attempts: i})
	}
	return l
}

func (l *chunkedLedger) read(_ context.Context, state []byte) ([]Record, []byte, error) {
	l.reads++
	from := 0
	if len(state) > 0 {
		from, _ = strconv.Atoi(string(state))
	}
	to := min(len(l.rows), from+ScanChunk)
	var after []byte
	if to < len(l.rows) {
		after = []byte(strconv.Itoa(to))
	}
	return slices.Clone(l.rows[from:to]), after, nil
}

// walk scans the whole ledger in pages of size, returning what was listed
// and the most rows one page gave Resolve.
func (l *chunkedLedger) walk(t *testing.T, f ScanFilter, size int) (listed []int, mostResolved int) {
	t.Helper()
	resolved := 0
	f.Resolve = func(_ context.Context, recs []Record) error { resolved += len(recs); return nil }
	var next []byte
	for pages := 0; ; pages++ {
		if pages > len(l.rows)+10 {
			t.Fatalf("no last page after %d pages", pages)
		}
		pos, err := decodeScanPosition(next)
		if err != nil {
			t.Fatalf("page %d: the next position does not decode: %v", pages, err)
		}
		resolved = 0
		page, err := scan(context.Background(), f, size, pos, l.read)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Records) > size {
			t.Fatalf("page %d: %d records, more than its size %d", pages, len(page.Records), size)
		}
		mostResolved = max(mostResolved, resolved)
		for _, r := range page.Records {
			listed = append(listed, r.Attempts)
		}
		if next = page.Next; next == nil {
			return listed, mostResolved
		}
	}
}

// Every matching row is listed once, in ledger order, at any page size,
// and a page resolves about the rows it lists: pages of one over a ledger
// of candidates resolve a window each, not the rest of the chunk the next
// page reads again.
func TestScanListsEachMatchOnceAndResolvesAboutAPage(t *testing.T) {
	const n = 3*ScanChunk + 17
	for _, size := range []int{1, 7, resolveWindow, ScanChunk - 1, ScanChunk, 500} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			l := newChunkedLedger(n, func(int) State { return Pending })
			listed, most := l.walk(t, ScanFilter{Tenant: "t"}, size)
			if len(listed) != n {
				t.Fatalf("listed %d rows, want %d", len(listed), n)
			}
			for i, at := range listed {
				if at != i {
					t.Fatalf("row %d listed as the %d-th: each once, in ledger order", at, i)
				}
			}
			// What a page resolves and does not list is less than a window.
			if want := size + resolveWindow; most > want {
				t.Errorf("a page resolved %d rows, want at most %d (page size %d, plus a window)", most, want, size)
			}
		})
	}
}

// Rows that do not match are not resolved and not listed; a page can end
// on a chunk's last row, and a page that lists nothing still moves on.
func TestScanSkipsRowsThatDoNotMatch(t *testing.T) {
	// Every 50th row FAILED: chunk ends (index 199, 399, ...) fall on
	// matches only when listing in pages of one lands there.
	failed := func(i int) State {
		if i%50 == 49 {
			return Failed
		}
		return Pending
	}
	l := newChunkedLedger(5*ScanChunk+3, failed)
	resolved := 0
	f := ScanFilter{Tenant: "t", States: []State{Failed}}
	listed, _ := l.walk(t, f, 1)
	for _, at := range listed {
		if l.rows[at].State != Failed {
			t.Errorf("row %d (%s) listed among FAILED", at, l.rows[at].State)
		}
	}
	if want := len(l.rows) / 50; len(listed) != want {
		t.Errorf("listed %d FAILED rows, want %d", len(listed), want)
	}
	f.Resolve = func(_ context.Context, recs []Record) error { resolved += len(recs); return nil }
	if _, err := scan(context.Background(), f, 1000, scanPosition{}, l.read); err != nil || resolved != len(l.rows)/50 {
		t.Errorf("one scan resolved %d rows (%v), want only the %d FAILED candidates", resolved, err, len(l.rows)/50)
	}
}

// A scan with no match stops after ScanBudget rows and says where to go on.
func TestScanStopsAtItsBudget(t *testing.T) {
	l := newChunkedLedger(ScanBudget+ScanChunk+1, func(int) State { return Pending })
	page, err := scan(context.Background(), ScanFilter{Tenant: "other"}, 10, scanPosition{}, l.read)
	if err != nil {
		t.Fatal(err)
	}
	pos, err := decodeScanPosition(page.Next)
	if len(page.Records) != 0 || err != nil || string(pos.chunk) != strconv.Itoa(ScanBudget) || pos.skip != 0 {
		t.Errorf("page of %d records, next %+v (%v); want none, next at row %d", len(page.Records), pos, err, ScanBudget)
	}
	if l.reads != ScanBudget/ScanChunk {
		t.Errorf("%d chunk reads, want %d", l.reads, ScanBudget/ScanChunk)
	}
}

// A failed resolve fails the page.
func TestScanResolveErrorFailsThePage(t *testing.T) {
	l := newChunkedLedger(10, func(int) State { return Pending })
	boom := errors.New("boom")
	f := ScanFilter{Tenant: "t", Resolve: func(context.Context, []Record) error { return boom }}
	if _, err := scan(context.Background(), f, 5, scanPosition{}, l.read); !errors.Is(err, boom) {
		t.Errorf("scan = %v, want the resolve error", err)
	}
}
