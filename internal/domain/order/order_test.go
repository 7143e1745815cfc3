package order

import (
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
)

func TestID(t *testing.T) {
	r1 := uuid.MustParse("17000000-0000-0000-0000-000000000500")
	r2 := uuid.MustParse("17000000-0000-0000-0000-000000000501")

	tests := []struct {
		name       string
		a, b       func() uuid.UUID
		wantEquals bool
	}{
		{"deterministic", func() uuid.UUID { return ID("acme", r1) }, func() uuid.UUID { return ID("acme", r1) }, true},
		{"request id parsed from upper case", func() uuid.UUID { return ID("acme", uuid.MustParse("a1b2c3d4-e5f6-4a7b-8c9d-0e1f2a3b4c5d")) }, func() uuid.UUID {
			return ID("acme", uuid.MustParse("A1B2C3D4-E5F6-4A7B-8C9D-0E1F2A3B4C5D"))
		}, true},
		{"differs by tenant", func() uuid.UUID { return ID("acme", r1) }, func() uuid.UUID { return ID("globex", r1) }, false},
		{"differs by tenant case", func() uuid.UUID { return ID("acme", r1) }, func() uuid.UUID { return ID("Acme", r1) }, false},
		{"differs by empty tenant", func() uuid.UUID { return ID("", r1) }, func() uuid.UUID { return ID("acme", r1) }, false},
		{"differs by request id", func() uuid.UUID { return ID("acme", r1) }, func() uuid.UUID { return ID("acme", r2) }, false},
		{"tenant/request boundary", func() uuid.UUID { return ID("acme", r1) }, func() uuid.UUID { return ID("acme\x00", r1) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := tt.a(), tt.b()
			if (a == b) != tt.wantEquals {
				t.Errorf("ID equality = %v, want %v (%v, %v)", a == b, tt.wantEquals, a, b)
			}
			for _, id := range []uuid.UUID{a, b} {
				if id.Version() != 5 {
					t.Errorf("ID %v has version %d, want 5", id, id.Version())
				}
				if id.Variant() != uuid.RFC4122 {
					t.Errorf("ID %v has variant %v, want RFC4122", id, id.Variant())
				}
				if id == r1 || id == r2 {
					t.Errorf("ID %v equals a request id", id)
				}
			}
		})
	}
}

// TestIDGolden pins one derived order id. Order ids are stored (orders
// tables, recorded outcomes) and re-derived after a ledger row expires; if
// this changes, a retry of an old request creates a second order.
func TestIDGolden(t *testing.T) {
	got := ID("acme", uuid.MustParse("17000000-0000-0000-0000-000000000500"))
	if want := uuid.MustParse("d830085c-95fe-5afd-a8a3-1ae595048f6c"); got != want {
		t.Errorf("ID = %v, want %v", got, want)
	}
}

func TestMonthOf(t *testing.T) {
	plus2 := time.FixedZone("UTC+2", 2*60*60)
	minus5 := time.FixedZone("UTC-5", -5*60*60)
	tests := []struct {
		name string
		t    time.Time
		want string
	}{
		{"mid month UTC", time.Date(2026, 9, 15, 12, 0, 0, 0, time.UTC), "2026-09-01"},
		{"first instant of month", time.Date(2026, 9, 1, 0, 0, 0, 0, time.UTC), "2026-09-01"},
		{"last instant of month", time.Date(2026, 9, 30, 23, 59, 59, 999_999_999, time.UTC), "2026-09-01"},
		{"east of UTC, already next month locally", time.Date(2026, 10, 1, 1, 30, 0, 0, plus2), "2026-09-01"},
		{"west of UTC, still previous month locally", time.Date(2026, 9, 30, 22, 0, 0, 0, minus5), "2026-10-01"},
		{"year boundary east of UTC", time.Date(2027, 1, 1, 0, 30, 0, 0, plus2), "2026-12-01"},
		{"single-digit month", time.Date(2026, 2, 28, 0, 0, 0, 0, time.UTC), "2026-02-01"},
		{"leap day", time.Date(2028, 2, 29, 23, 0, 0, 0, time.UTC), "2028-02-01"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := MonthOf(tt.t); got != tt.want {
				t.Errorf("MonthOf(%v) = %q, want %q", tt.t, got, tt.want)
			}
		})
	}
}

func sampleCommand() Command {
	return Command{
		CustomerID: "cust-safe",
		Total:      "77.69",
		Currency:   "EUR",
		Lines: []Line{
			{SKU: "sku-a", Quantity: 3, UnitPrice: "19.23"},
			{SKU: "sku-b", Quantity: 2, UnitPrice: "10.00"},
		},
	}
}

func TestNew(t *testing.T) {
	reqID := uuid.MustParse("17000000-0000-0000-0000-000000000500")
	plus2 := time.FixedZone("UTC+2", 2*60*60)
	createdAt := time.Date(2026, 10, 1, 1, 30, 0, 123_000_000, plus2)
	cmd := sampleCommand()

	o := New("acme", reqID, cmd, createdAt)
	want := Order{
		ID:         ID("acme", reqID),
		Tenant:     "acme",
		CustomerID: "cust-safe",
		Month:      "2026-09-01",
		Status:     StatusCreated,
		Total:      "77.69",
		Currency:   "EUR",
		RequestID:  reqID,
		CreatedAt:  time.Date(2026, 9, 30, 23, 30, 0, 123_000_000, time.UTC),
		Lines:      cmd.Lines,
		Version:    1,
		UpdatedAt:  time.Date(2026, 9, 30, 23, 30, 0, 123_000_000, time.UTC),
	}
	if !reflect.DeepEqual(o, want) {
		t.Errorf("New = %+v\nwant  %+v", o, want)
	}
	if o.CreatedAt.Location() != time.UTC {
		t.Errorf("CreatedAt location = %v, want UTC", o.CreatedAt.Location())
	}

	// Same inputs (the same instant in any zone) give deeply equal orders.
	again := New("acme", reqID, sampleCommand(), createdAt.In(time.UTC))
	if !reflect.DeepEqual(o, again) {
		t.Errorf("New is not deterministic:\n  %+v\n  %+v", o, again)
	}

	// Each argument reaches the order.
	other := New("globex", uuid.MustParse("17000000-0000-0000-0000-000000000501"), Command{CustomerID: "c2", Total: "1200", Currency: "JPY"}, createdAt.Add(24*time.Hour))
	if other.Tenant != "globex" || other.CustomerID != "c2" || other.Total != "1200" || other.Currency != "JPY" ||
		other.Month != "2026-10-01" || other.Lines != nil || other.ID == o.ID || other.RequestID == o.RequestID {
		t.Errorf("New did not take its arguments: %+v", other)
	}
}

func TestOutcomeRoundTrip(t *testing.T) {
	reqID := uuid.MustParse("17000000-0000-0000-0000-000000000500")
	tests := []struct {
		name string
		o    Order
	}{
		{"with lines, ms precision", New("acme", reqID, sampleCommand(), time.Date(2026, 10, 1, 1, 30, 0, 123_000_000, time.FixedZone("UTC+2", 7200)))},
		{"no lines", New("acme", reqID, Command{CustomerID: "c", Total: "1200", Currency: "JPY"}, time.UnixMilli(1_790_000_000_123))},
		{"json-special strings", New(`t"<&>`, reqID, Command{CustomerID: `a\b"é`, Total: "1.500", Currency: "KWD",
			Lines: []Line{{SKU: "<sku>", Quantity: 1, UnitPrice: "1.500"}}}, time.UnixMilli(1_790_000_000_999))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := tt.o.EncodeOutcome()
			got, err := DecodeOutcome(b)
			if err != nil {
				t.Fatalf("DecodeOutcome(%s): %v", b, err)
			}
			if !got.CreatedAt.Equal(tt.o.CreatedAt) {
				t.Errorf("CreatedAt = %v, want %v", got.CreatedAt, tt.o.CreatedAt)
			}
			// Compare the rest field by field (time via Equal above).
			g, w := got, tt.o
			g.CreatedAt, w.CreatedAt = time.Time{}, time.Time{}
			if !reflect.DeepEqual(g, w) {
				t.Errorf("round trip:\n got %+v\nwant %+v", g, w)
			}
			// Re-encoding the decoded order gives the same bytes.
			if again := got.EncodeOutcome(); string(again) != string(b) {
				t.Errorf("re-encoded outcome differs:\n%s\n%s", again, b)
			}
		})
	}
}

func TestOutcomeEncodingFields(t *testing.T) {
	reqID := uuid.MustParse("17000000-0000-0000-0000-000000000500")
	o := New("acme", reqID, Command{CustomerID: "cust-safe", Total: "77.70", Currency: "EUR"}, time.Date(2026, 9, 30, 23, 30, 0, 5_000_000, time.UTC))
	want := `{"order_id":"` + ID("acme", reqID).String() + `","tenant":"acme","customer_id":"cust-safe","order_month":"2026-09-01",` +
		`"status":"CREATED","total":"77.70","currency":"EUR","request_id":"17000000-0000-0000-0000-000000000500",` +
		`"created_at":"2026-09-30T23:30:00.005Z"}`
	if got := string(o.EncodeOutcome()); got != want {
		t.Errorf("EncodeOutcome =\n%s\nwant\n%s", got, want)
	}
}

func TestDecodeOutcomeError(t *testing.T) {
	for _, b := range [][]byte{nil, []byte("{"), []byte(`{"order_id":"not-a-uuid"}`), []byte(`{"created_at":"yesterday"}`)} {
		if _, err := DecodeOutcome(b); err == nil {
			t.Errorf("DecodeOutcome(%q): no error", b)
		}
	}
}
