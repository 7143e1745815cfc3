package robustness

import (
	"fmt"
	"slices"

	"github.com/anishathalye/porcupine"
)

// Event is one record of the events topic, decoded.
type Event struct {
	ID      string // the event-id header (and the event's event_id)
	Type    string // ORDER_CREATED, ORDER_CANCELLED, ORDER_AMENDED
	Tenant  string
	OrderID string
	Version int64 // order_version
	// Partition and Offset place the record; records are checked in the
	// order they are given, which must be each partition's offset order.
	Partition int32
	Offset    int64
}

// Ack is an order or change a client was told was accepted: its event must
// be published.
type Ack struct {
	Tenant  string
	OrderID string
	Version int64 // 1 for the order's creation
}

func (a Ack) String() string { return fmt.Sprintf("%s/%s v%d", a.Tenant, a.OrderID, a.Version) }

// Acknowledged lists the distinct acknowledged writes of history.
func Acknowledged(history []porcupine.Operation) []Ack {
	seen := map[Ack]bool{}
	var acks []Ack
	for _, op := range history {
		in, out := op.Input.(Input), op.Output.(Output)
		if out.Result != OK || !(in.Kind == Create || in.Kind.isChange()) {
			continue
		}
		a := Ack{Tenant: in.Tenant, OrderID: out.OrderID, Version: 1}
		if in.Kind.isChange() {
			a.Version = out.Version
		}
		if !seen[a] {
			seen[a] = true
			acks = append(acks, a)
		}
	}
	return acks
}

// EventVerdict is what the check of the topic found.
type EventVerdict struct {
	Records   int // records read
	Distinct  int // distinct event ids
	MaxCopies int // the most records of one event id
	Acked     int // acknowledged writes checked
	// Shared counts event ids that name more than one event; Missing,
	// acknowledged writes without an event. Problems describes each.
	Shared, Missing int
	Problems        []string
	// Reordered lists each order version first delivered after a later
	// version of the order. Not a broken promise: publication order is
	// not version order (docs/outbox.md, "Ordering per order"), and each
	// event carries the whole order at its version; reported so that a
	// run shows how often consumers meet it.
	Reordered []string
}

// OK reports whether the topic kept every promise checked.
func (v EventVerdict) OK() bool { return len(v.Problems) == 0 }

func (v EventVerdict) String() string {
	s := fmt.Sprintf("%d records, %d distinct events (at most %d copies of one), %d acknowledged writes", v.Records, v.Distinct, v.MaxCopies, v.Acked)
	if v.OK() {
		s += ": every one published, ids unique"
	} else {
		s += fmt.Sprintf(": %d event ids name two events, %d acknowledged writes unpublished", v.Shared, v.Missing)
	}
	return s + fmt.Sprintf("; %d versions first delivered after a later one", len(v.Reordered))
}

// CheckEvents checks the records of the topic (in each partition's offset
// order) against the acknowledged writes:
//   - every acknowledged order and change has an event of its tenant,
//     order and version;
//   - an event id names one event: every record carrying it is of the same
//     tenant, order, version and type (copies of one event are allowed);
//
// and lists the versions first delivered after a later one (Reordered).
func CheckEvents(events []Event, acks []Ack) EventVerdict {
	v := EventVerdict{Records: len(events), Acked: len(acks)}
	type what struct {
		typ, tenant, order string
		version            int64
	}
	byID := map[string]what{}
	shared := map[string]bool{}
	copies := map[string]int{}
	published := map[Ack]bool{}
	newest := map[[2]string]int64{} // (tenant, order) -> newest version first delivered so far
	for _, e := range events {
		w := what{e.Type, e.Tenant, e.OrderID, e.Version}
		copies[e.ID]++
		v.MaxCopies = max(v.MaxCopies, copies[e.ID])
		if prev, ok := byID[e.ID]; !ok {
			byID[e.ID] = w
		} else if prev != w {
			shared[e.ID] = true
			v.Problems = append(v.Problems, fmt.Sprintf("event id %s names two events: %s of %s/%s v%d and %s of %s/%s v%d (record %d@%d)",
				e.ID, prev.typ, prev.tenant, prev.order, prev.version, w.typ, w.tenant, w.order, w.version, e.Partition, e.Offset))
		}
		a := Ack{Tenant: e.Tenant, OrderID: e.OrderID, Version: e.Version}
		if published[a] {
			continue
		}
		published[a] = true
		k := [2]string{e.Tenant, e.OrderID}
		if e.Version < newest[k] {
			v.Reordered = append(v.Reordered, fmt.Sprintf("order %s/%s: v%d first delivered after v%d (record %d@%d)",
				e.Tenant, e.OrderID, e.Version, newest[k], e.Partition, e.Offset))
		}
		newest[k] = max(newest[k], e.Version)
	}
	v.Distinct, v.Shared = len(byID), len(shared)
	var missing []string
	for _, a := range acks {
		if !published[a] {
			missing = append(missing, a.String())
		}
	}
	slices.Sort(missing)
	v.Missing = len(missing)
	for _, m := range missing {
		v.Problems = append(v.Problems, "acknowledged but never published: "+m)
	}
	return v
}
