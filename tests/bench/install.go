package bench

import (
	"os"
	"path/filepath"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// install copies the lockrun programs beside binary (lockrun, its watchdog
// and its backends' programs, which it starts from its own directory)
// into a directory of the bench's, and drops the copies from the page
// cache, so that each first run reads them in as an installed program is
// read after a boot, and as the peers' programs were. Two builds measured
// against each other are then measured alike: a program's start depends
// on how its file came into the cache. Fresh from the Go linker, which
// writes its output through a memory map, lockrun run k -- true took about
// 0.45 ms longer than a copy written in one piece, and a copy read back in
// by its first exec about as long (docs/performance.md). It returns the
// copy of binary.
func install(tb testing.TB, binary string) string {
	tb.Helper()
	progs, err := filepath.Glob(filepath.Join(filepath.Dir(binary), "lockrun*"))
	if err != nil || len(progs) == 0 {
		tb.Fatalf("no lockrun programs beside %s", binary)
	}
	dir := tb.TempDir()
	for _, src := range progs {
		fi, err := os.Stat(src)
		if err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			continue // the man page, completions
		}
		dst := filepath.Join(dir, filepath.Base(src))
		if err := copyUncached(src, dst); err != nil {
			tb.Fatal(err)
		}
		if n, err := cachedPages(dst); err != nil || n > 0 {
			tb.Fatalf("%s: %d pages still cached (%v): is %s a tmpfs?", dst, n, err, dir)
		}
	}
	copied := filepath.Join(dir, filepath.Base(binary))
	if _, err := os.Stat(copied); err != nil {
		tb.Fatalf("%s is not a lockrun program: %v", binary, err)
	}
	return copied
}

// cachedPages counts the pages of path in the page cache: mincore(2) of a
// mapping, which does not read the file in.
func cachedPages(path string) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || fi.Size() == 0 {
		return 0, err
	}
	m, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return 0, err
	}
	defer unix.Munmap(m)
	vec := make([]byte, (len(m)+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		return 0, errno
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n, nil
}

// copyUncached copies the program src to dst, durably, and asks the kernel
// to drop dst's pages from its cache.
func copyUncached(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o755)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		return err
	}
	if err := f.Sync(); err != nil { // dirty pages stay cached
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}
