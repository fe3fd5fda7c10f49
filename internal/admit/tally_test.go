package admit

import (
	"testing"
)

// TestTallyWaitsForEveryAttempt: a request's totals are handed over only
// once every attempt admitted under its tally has ended, however late
// (a hedge's loser may end after the answer), and they are the ledger's
// settled spend: a billed failure, a settled answer and a kept hold.
func TestTallyWaitsForEveryAttempt(t *testing.T) {
	e := setup(t, pricing+budgetKey("10", ""))
	id := e.id(t, "sk-b")
	r := reservation()
	var tally Tally
	tctx := WithTally(ctx, &tally)

	billed, _ := e.c.Admit(tctx, attempt(id, "m1"))
	winner, _ := e.c.Admit(tctx, attempt(id, "m2"))
	loser, _ := e.c.Admit(tctx, attempt(id, "m1"))
	if billed == nil || winner == nil || loser == nil {
		t.Fatal("an attempt was refused")
	}
	bill := int64(7_000)
	billed.Settle(Usage{Input: 3, CostNanoUSD: &bill}) // a failure the provider billed
	winner.Settle(Usage{Input: 10, Output: 5})         // 10×10,000 + 5×20,000

	var got []TallyTotals
	tally.Close(func(tt TallyTotals) { got = append(got, tt) })
	if len(got) != 0 {
		t.Fatalf("totals handed over while an attempt still ran: %+v", got)
	}
	loser.Keep() // ends after the request closed
	loser.Keep() // exactly once
	if len(got) != 1 {
		t.Fatalf("totals handed over %d times, want once", len(got))
	}
	want := TallyTotals{Attempts: 3, Input: 13, Output: 5, Cost: 7_000 + 200_000, Held: r}
	if got[0] != want {
		t.Fatalf("totals %+v, want %+v", got[0], want)
	}
	if sv := spendOf(t, e, id); sv.SettledNano != want.Cost || sv.ReservedNano != want.Held {
		t.Fatalf("the ledger settled %d and holds %d; the tally says %d and %d", sv.SettledNano, sv.ReservedNano, want.Cost, want.Held)
	}

	// Every attempt ended before Close: handed over at once.
	var quick Tally
	pm, _ := e.c.Admit(WithTally(ctx, &quick), attempt(id, "m1"))
	pm.Fail()
	called := 0
	quick.Close(func(tt TallyTotals) {
		called++
		if tt.Attempts != 1 || tt.Cost != 0 {
			t.Errorf("%+v", tt)
		}
	})
	if called != 1 {
		t.Fatalf("called %d times", called)
	}
}
