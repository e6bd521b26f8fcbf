// Package pagetrim gives back the page mappings that a long-lived
// process's start-up made of its own program and its steady state does
// not use.
//
// Linux maps a program's page cache in whole folios, up to megabytes each
// on recent kernels, so a Go program that parses flags, dials a server
// and speaks gRPC has most of a 15 MB binary in its resident set by the
// time it is up, though holding a lock then runs a small part of it.
package pagetrim

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Program unmaps this process's program's pages that no write has copied
// (its code and read-only data) from its page tables. They stay in the
// page cache, shared with every other run of the program: those the
// process touches again map back then, at the cost of a minor fault, and
// the rest stop counting in its resident set and become as reclaimable as
// any cached file. A mapping holding a private copy of any page (such as
// a relocated read-only segment of a position-independent build, in
// memory or swapped out) is left whole, since dropping it would lose the
// copy. Program returns how many
// bytes of mappings it dropped.
func Program() (int64, error) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return 0, fmt.Errorf("pagetrim: %w", err)
	}
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		return 0, fmt.Errorf("pagetrim: %w", err)
	}
	defer f.Close()
	spans, err := droppable(f, exe)
	if err != nil {
		return 0, fmt.Errorf("pagetrim: reading /proc/self/smaps: %w", err)
	}
	var n int64
	for _, s := range spans {
		// A raw call: the range is a mapping of this process, not Go
		// memory that a slice could point into.
		if _, _, e := unix.Syscall(unix.SYS_MADVISE, s.lo, s.hi-s.lo, unix.MADV_DONTNEED); e != 0 {
			return n, fmt.Errorf("pagetrim: madvise %#x-%#x: %w", s.lo, s.hi, e)
		}
		n += int64(s.hi - s.lo)
	}
	return n, nil
}

// Resident is how many bytes of process pid's program its private
// read-only mappings of it have in its resident set: what Program drops.
func Resident(pid int) (int64, error) {
	dir := "/proc/" + strconv.Itoa(pid)
	exe, err := os.Readlink(dir + "/exe")
	if err != nil {
		return 0, fmt.Errorf("pagetrim: %w", err)
	}
	f, err := os.Open(dir + "/smaps")
	if err != nil {
		return 0, fmt.Errorf("pagetrim: %w", err)
	}
	defer f.Close()
	var kb int64
	counting := false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		if isHeader(line) {
			_, counting = header(line, exe)
			continue
		}
		if v, ok := strings.CutPrefix(line, "Rss:"); ok && counting {
			n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("pagetrim: %s/smaps: %q: %w", dir, line, err)
			}
			kb += n
		}
	}
	return kb << 10, sc.Err()
}

// span is one mapping, [lo, hi).
type span struct{ lo, hi uintptr }

// droppable reads smaps (the format of /proc/self/smaps) and returns the
// mappings of the file at path that are private, not writable and hold
// no private copy of a page, in memory or in swap: those whose every page
// is the page cache's.
func droppable(smaps io.Reader, path string) ([]span, error) {
	var out []span
	var cur *span // the mapping being read, while it may be dropped
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		line := sc.Text()
		if s, ok := header(line, path); ok || isHeader(line) {
			cur = nil
			if ok {
				out = append(out, s)
				cur = &out[len(out)-1]
			}
			continue
		}
		if cur != nil && hasPrivateCopies(line) {
			out, cur = out[:len(out)-1], nil
		}
	}
	return out, sc.Err()
}

// hasPrivateCopies tells whether a mapping's field line says that some of
// its pages are private copies: in memory (Anonymous) or swapped out
// (Swap, which Anonymous does not count).
func hasPrivateCopies(line string) bool {
	for _, name := range []string{"Anonymous:", "Swap:"} {
		if v, ok := strings.CutPrefix(line, name); ok && strings.TrimSpace(v) != "0 kB" {
			return true
		}
	}
	return false
}

// isHeader tells a mapping's first line ("lo-hi perms offset dev inode
// [path]") from its fields ("Name:  value").
func isHeader(line string) bool {
	first, _, _ := strings.Cut(line, " ")
	return !strings.HasSuffix(first, ":")
}

// header parses a mapping's first line, and reports whether it is a
// private, read-only mapping of the file at path.
func header(line, path string) (span, bool) {
	// Five fields, then the path after some padding, kept as it is: a
	// path may hold runs of spaces.
	var f [5]string
	rest := line
	for i := range f {
		f[i], rest, _ = strings.Cut(strings.TrimLeft(rest, " "), " ")
	}
	if strings.TrimLeft(rest, " ") != path {
		return span{}, false
	}
	perms := f[1]
	if len(perms) != 4 || perms[1] == 'w' || perms[3] != 'p' {
		return span{}, false
	}
	lo, hi, ok := strings.Cut(f[0], "-")
	if !ok {
		return span{}, false
	}
	l, err1 := strconv.ParseUint(lo, 16, 64)
	h, err2 := strconv.ParseUint(hi, 16, 64)
	if err1 != nil || err2 != nil || h <= l {
		return span{}, false
	}
	return span{uintptr(l), uintptr(h)}, true
}
