package dispatch

import "testing"

var (
	ingressOnly = Role{Ingress: true}
	workerOnly  = Role{Worker: true}
)

// --role reads back as it was spelled (health detail shows String); an
// unknown role is refused.
func TestParseRole(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		role     Role
	}{
		{"", "all", Role{true, true}}, {"all", "all", Role{true, true}},
		{"ingress", "ingress", ingressOnly}, {"worker", "worker", workerOnly},
	} {
		r, err := ParseRole(tc.in)
		if err != nil || r != tc.role || r.String() != tc.want {
			t.Errorf("ParseRole(%q) = %+v %q, %v", tc.in, r, r.String(), err)
		}
	}
	if _, err := ParseRole("both"); err == nil {
		t.Error("an unknown role was accepted")
	}
}
