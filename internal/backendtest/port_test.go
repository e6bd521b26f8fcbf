package backendtest

import (
	"errors"
	"testing"
)

func TestOnFreePortsRetriesOnNewPorts(t *testing.T) {
	var tried [][]int
	OnFreePorts(t, 2, func(ports []int) error {
		tried = append(tried, ports)
		if len(tried) < 3 {
			return errors.New("address already in use")
		}
		return nil
	})
	if len(tried) != 3 {
		t.Fatalf("start called %d times; want 3 (two failures, then success)", len(tried))
	}
	for _, p := range tried {
		if len(p) != 2 || p[0] == p[1] || p[0] == 0 {
			t.Errorf("ports %v: want two distinct ports", p)
		}
	}
}
