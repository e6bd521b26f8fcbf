package pagetrim

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// A synthetic smaps: the program's code, its read-only data with a
// private copy of one page (a relocated segment), its writable data,
// read-only data without copies, with copies swapped out, and without a
// Swap line, another file's read-only mappings and an anonymous one.
const smaps = `00400000-00a5d000 r-xp 00000000 fe:00 9986406                            /opt/lockrun run
Size:               6516 kB
Rss:                3968 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me
00a5d000-011f2000 r--p 0065d000 fe:00 9986406                            /opt/lockrun run
Rss:                4876 kB
Anonymous:             4 kB
VmFlags: rd mr mw me
011f2000-01268000 rw-p 00df2000 fe:00 9986406                            /opt/lockrun run
Anonymous:           100 kB
01300000-01400000 r--p 00000000 fe:00 9986406                            /opt/lockrun run
Anonymous:             0 kB
Swap:                  0 kB
01400000-01500000 r--p 00000000 fe:00 9986406                            /opt/lockrun run
Anonymous:             0 kB
Swap:                520 kB
01500000-01600000 r--p 00000000 fe:00 9986406                            /opt/lockrun run
Anonymous:             0 kB
01600000-01700000 r--p 00000000 fe:00 4242                               /opt/lockrun  run
Anonymous:             0 kB
7fb64a446000-7fb64a4f8000 r--p 00000000 fe:00 1234                       /usr/lib/locale/C.utf8
Anonymous:             0 kB
7fb64a5f8000-7fb64a658000 rw-p 00000000 00:00 0 
Anonymous:           384 kB
`

func TestDroppableTakesPrivateReadOnlyMappingsWithoutCopies(t *testing.T) {
	got, err := droppable(strings.NewReader(smaps), "/opt/lockrun run")
	if err != nil {
		t.Fatal(err)
	}
	want := []span{{0x400000, 0xa5d000}, {0x1300000, 0x1400000}, {0x1500000, 0x1600000}}
	if !slices.Equal(got, want) {
		t.Errorf("droppable = %x, want %x (code and the read-only data without copies, in memory or swapped out)", got, want)
	}
	if got, _ := droppable(strings.NewReader(smaps), "/opt/lockrun"); len(got) != 0 {
		t.Errorf("droppable for another path = %x, want none", got)
	}
	if got, _ := droppable(strings.NewReader(smaps), "/opt/lockrun  run"); !slices.Equal(got, []span{{0x1600000, 0x1700000}}) {
		t.Errorf("droppable for a path with two spaces in a row = %x, want its mapping", got)
	}
}

// On this process: the test binary's mapped pages shrink, and the code
// that runs afterwards still works (it maps back what it needs).
func TestProgramShrinksTheResidentProgram(t *testing.T) {
	before, err := Resident(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	n, err := Program()
	if err != nil {
		t.Fatal(err)
	}
	after, err := Resident(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("dropped %d kB of mappings; resident program %d kB -> %d kB", n>>10, before>>10, after>>10)
	if n == 0 || after >= before {
		t.Errorf("Program dropped %d bytes of mappings; resident program %d -> %d bytes, want fewer", n, before, after)
	}
}
