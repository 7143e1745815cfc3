package main

import (
	"slices"
	"strings"
	"testing"
)

func TestReadRequestIDs(t *testing.T) {
	const (
		a = "17000000-0000-0000-0000-000000000500"
		b = "17000000-0000-0000-0000-000000000501"
		c = "17000000-0000-0000-0000-000000000502"
	)
	in := "# from the client example's -out\n" +
		a + "\n\n" +
		`{"request_id":"` + b + `","order_id":"x","replayed":true}` + "\n" +
		"  " + c + "  \n" +
		a + "\n" // seen before: checked once
	got, err := readRequestIDs(strings.NewReader(in))
	if err != nil || !slices.Equal(got, []string{a, b, c}) {
		t.Fatalf("readRequestIDs = %v, %v; want %v", got, err, []string{a, b, c})
	}

	for _, bad := range []string{
		"",                                   // no ids
		"# only a comment\n",                 // no ids
		"not-a-uuid\n",                       // not a request id
		"17000000000000000000000000000500\n", // a UUID, but not the dashed form
		`{"order_id":"x"}` + "\n",            // no request_id
		`{"request_id":` + "\n",              // broken JSON
		a + "\n" + `{"request_id":"nope"}` + "\n",
	} {
		if ids, err := readRequestIDs(strings.NewReader(bad)); err == nil {
			t.Errorf("readRequestIDs(%q) = %v, want an error", bad, ids)
		}
	}
	if _, err := readRequestIDs(strings.NewReader("x\n" + a + "\nbad\n")); err == nil || !strings.Contains(err.Error(), "line 1") {
		t.Errorf("error %v does not name the line", err)
	}
}

func TestTallyCountsEachOutcomeAndKeepsTheProblemsInOrder(t *testing.T) {
	rep := tally([]check{
		{RequestID: "1", Outcome: outcomeComplete},
		{RequestID: "2", Outcome: outcomeMissing},
		{RequestID: "3", Outcome: outcomePending},
		{RequestID: "4", Outcome: outcomeComplete},
		{RequestID: "5", Outcome: outcomeFailed},
		{RequestID: "6", Outcome: outcomeMismatched},
	})
	if rep.Checked != 6 || rep.Complete != 2 || rep.Missing != 1 || rep.Pending != 1 || rep.Failed != 1 || rep.Mismatched != 1 {
		t.Errorf("counts %+v", rep)
	}
	var ids []string
	for _, p := range rep.Problems {
		ids = append(ids, p.RequestID)
	}
	if !slices.Equal(ids, []string{"2", "3", "5", "6"}) {
		t.Errorf("problems %v, want 2 3 5 6", ids)
	}
}
