package app

import (
	"fmt"
	"testing"

	"github.com/lockrun/lockrun/backend"
)

func TestHeldFields(t *testing.T) {
	for _, c := range []struct {
		st   backend.Status
		want string
	}{
		{backend.Status{Held: true, Holder: "web-1:42", Token: 7}, "[holder web-1:42 token 7]"},
		{backend.Status{Held: true}, "[]"}, // a holder the backend could not name: no "" nor token 0
		{backend.Status{Held: true, Limit: 2, Holders: []backend.Status{{Holder: "a", Token: 1}, {Holder: "b", Token: 2}}}, "[holders 2 limit 2]"},
	} {
		if got := fmt.Sprint(heldFields(c.st)); got != c.want {
			t.Errorf("heldFields(%+v) = %s, want %s", c.st, got, c.want)
		}
	}
}
