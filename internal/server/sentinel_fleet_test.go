package server

import (
	"testing"

	"switchboard/internal/store/redistest"
)

// redis.sentinel: a fleet finds its primary through three sentinels. The
// primary is killed under load: budgeted requests get 503 with
// Retry-After until the sentinels promote the replica, unbudgeted ones
// are served (rates fail open), and then every gateway replica serves
// budgeted requests from the new primary without a restart.
func TestSentinelFleetSurvivesFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a primary, a replica and three sentinels")
	}
	g := redistest.StartSentinels(t, "sb", 3)
	at := sentinelAt(g)
	fleet := startFleetAt(t, at, 2, failoverYAML()+"redis: "+at.yaml()+"\n")
	r := underFailover(t, fleet, g.KillPrimary)
	t.Logf("primary %s killed: the sentinels promoted %s after %v, every gateway replica serving budgeted requests after %v; "+
		"%d answered 200, %d budgeted got 503 meanwhile", g.Primary.Addr, g.Replica.Addr, r.promoted, r.recovered, r.ok, r.unavailable)
}
