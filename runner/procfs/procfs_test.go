package procfs

import (
	"os"
	"testing"
	"time"
)

func TestSwitchesGrowWhenTheProcessSleeps(t *testing.T) {
	before := Switches(os.Getpid())
	for range 10 {
		time.Sleep(time.Millisecond)
	}
	if after := Switches(os.Getpid()); before <= 0 || after <= before {
		t.Errorf("context switches %d, then %d after sleeping 10 times", before, after)
	}
	if n := Switches(-1); n != 0 {
		t.Errorf("Switches of no process = %d, want 0", n)
	}
}
