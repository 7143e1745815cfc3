package order

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"

	"github.com/atlasmart/orderd/internal/domain/fault"
)

func amendInput(note string) ChangeInput {
	return ChangeInput{Operation: OperationAmend, RequestID: "17000000-0000-0000-0000-000000000600",
		OrderID: "27000000-0000-0000-0000-000000000001", ExpectedVersion: 7, ShippingNote: note}
}

// What looks the same is the same change: NFC, surrounding whitespace and
// how line breaks are written (LF, CRLF, CR) do not change the fingerprint;
// another note, version or operation does.
func TestChangeCanonicalForm(t *testing.T) {
	fp := func(in ChangeInput) string {
		t.Helper()
		_, cmd, err := CanonicalizeChange(in)
		if err != nil {
			t.Fatalf("CanonicalizeChange(%+v): %v", in, err)
		}
		return ChangeFingerprint(in.Operation, cmd.Encode())
	}
	base := fp(amendInput("Café door"))
	if got := fp(amendInput("  Cafe\u0301 door\n")); got != base {
		t.Errorf("decomposed and padded note: another fingerprint")
	}
	lf := fp(amendInput("ring twice\nback door"))
	for _, note := range []string{"ring twice\r\nback door", "ring twice\rback door"} {
		if fp(amendInput(note)) != lf {
			t.Errorf("note %q: another fingerprint than with a line feed", note)
		}
	}
	other := amendInput("Café door")
	other.ExpectedVersion = 8
	cancel := amendInput("")
	cancel.Operation = OperationCancel
	for _, in := range []ChangeInput{amendInput("Cafe door"), other, cancel} {
		if fp(in) == base {
			t.Errorf("%+v has the same fingerprint as another change", in)
		}
	}
	// A cancel ignores a note (it has none).
	cancelWithNote := cancel
	cancelWithNote.ShippingNote = "ignored"
	if fp(cancelWithNote) != fp(cancel) {
		t.Error("a cancel's fingerprint depends on a note it does not take")
	}
}

func TestChangeViolations(t *testing.T) {
	cases := map[string]struct {
		in     ChangeInput
		fields []string
	}{
		"everything missing": {ChangeInput{Operation: OperationAmend}, []string{"request_id", "order_id", "expected_version"}},
		"nil ids, version too high": {ChangeInput{Operation: OperationCancel, RequestID: uuid.Nil.String(), OrderID: uuid.Nil.String(),
			ExpectedVersion: MaxVersion + 1}, []string{"request_id", "order_id", "expected_version"}},
		"note too long":     {amendInput(strings.Repeat("é", MaxShippingNoteLength+1)), []string{"shipping_note"}},
		"note with a NUL":   {amendInput("a\x00b"), []string{"shipping_note"}},
		"note not UTF-8":    {amendInput("a\xffb"), []string{"shipping_note"}},
		"undashed order id": {ChangeInput{Operation: OperationCancel, RequestID: "17000000-0000-0000-0000-000000000600", OrderID: strings.ReplaceAll(uuid.NewString(), "-", ""), ExpectedVersion: 1}, []string{"order_id"}},
		"negative version": {ChangeInput{Operation: OperationCancel, RequestID: "17000000-0000-0000-0000-000000000600",
			OrderID: uuid.NewString(), ExpectedVersion: -1}, []string{"expected_version"}},
	}
	for name, c := range cases {
		_, _, err := CanonicalizeChange(c.in)
		fe, ok := fault.As(err)
		if !ok || fe.Kind != fault.Invalid {
			t.Errorf("%s: %v, want Invalid", name, err)
			continue
		}
		var got []string
		for _, v := range fe.Violations {
			got = append(got, v.Field)
		}
		if strings.Join(got, ",") != strings.Join(c.fields, ",") {
			t.Errorf("%s: violations on %v, want %v", name, got, c.fields)
		}
	}
	if _, cmd, err := CanonicalizeChange(amendInput(strings.Repeat("é", MaxShippingNoteLength))); err != nil || utf8.RuneCountInString(cmd.ShippingNote) != MaxShippingNoteLength {
		t.Errorf("a note of exactly the limit: %v", err)
	}
}

// The order at a version is its creation with every change applied in
// order; a cancel keeps the note; AsCreated undoes them all.
func TestOrderAtHistory(t *testing.T) {
	at := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	o := New("acme", uuid.New(), Command{CustomerID: "c", Total: "1.00", Currency: "EUR"}, at)
	enc := ChangeCommand{OrderID: o.ID, ExpectedVersion: 1, ShippingNote: "door"}
	amend := NewChange("acme", OperationAmend, uuid.New(), "fp", enc, at.Add(time.Minute))
	cancel := NewChange("acme", OperationCancel, uuid.New(), "fp", ChangeCommand{OrderID: o.ID, ExpectedVersion: 2}, at.Add(2*time.Minute))
	got := o.At([]Change{amend, cancel})
	if got.Version != 3 || got.Status != StatusCancelled || got.ShippingNote != "door" || !got.UpdatedAt.Equal(cancel.At) {
		t.Errorf("order at version 3 = %+v", got)
	}
	if back := got.AsCreated(); back.Version != 1 || back.Status != StatusCreated || back.ShippingNote != "" || !back.UpdatedAt.Equal(at) {
		t.Errorf("AsCreated = %+v", back)
	}
	if ChangeID("acme", OperationAmend, amend.RequestID) != amend.ID || ChangeID("acme", OperationCancel, amend.RequestID) == amend.ID ||
		ChangeID("globex", OperationAmend, amend.RequestID) == amend.ID {
		t.Error("change ids are not scoped by tenant and operation")
	}
}

func FuzzCanonicalizeChangeNote(f *testing.F) {
	for _, s := range []string{"", "door", " Cafe\u0301 ", "a\nb", "a\r\nb", "a\rb", "\x00", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, note string) {
		_, cmd, err := CanonicalizeChange(amendInput(note))
		if err != nil {
			if fault.KindOf(err) != fault.Invalid {
				t.Fatalf("note %q: %v, want Invalid or nil", note, err)
			}
			return
		}
		// Canonical is a fixed point, valid UTF-8, within the limit.
		_, again, err := CanonicalizeChange(amendInput(cmd.ShippingNote))
		if err != nil || again.ShippingNote != cmd.ShippingNote || !utf8.ValidString(cmd.ShippingNote) ||
			utf8.RuneCountInString(cmd.ShippingNote) > MaxShippingNoteLength {
			t.Fatalf("note %q canonicalised to %q, which canonicalises to %q (%v)", note, cmd.ShippingNote, again.ShippingNote, err)
		}
	})
}
