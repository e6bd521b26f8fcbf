package file

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/lockrun/lockrun/backend"
)

// watcher closes lost when inotify reports a change that costs the lease
// its lock: the file's name removed, renamed or taken by another file
// (events on the directory), or the file written to by a revocation or
// unlinked (events on the file). Every event is judged by lease.check,
// so that our own mtime stamps and other keys' files cost a check only.
type watcher struct {
	lost     chan struct{}
	ino      *os.File // nil when the kernel could not watch
	stopOnce sync.Once
	lostOnce sync.Once
}

const (
	dirEvents  = unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO | unix.IN_CREATE | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR
	fileEvents = unix.IN_ATTRIB | unix.IN_MODIFY | unix.IN_MOVE_SELF | unix.IN_DELETE_SELF
)

// watchDelay is how long a lease lives before its watch begins. Setting
// up inotify is cheap, but tearing an instance down waits for the kernel's
// SRCU grace period (15 ms measured here, under load): a lease shorter than
// this, such as a cron job's quick command, never pays for it. A change in
// the meantime is caught by the check the watch makes when it starts.
const watchDelay = 250 * time.Millisecond

func newWatcher() *watcher { return &watcher{lost: make(chan struct{})} }

// start watches l's file and directory; l.mu is held. The watches name
// paths: the file may have been removed or replaced before they were set
// (then one of them fails), so the lease is judged once more after.
func (w *watcher) start(l *lease) {
	if fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK); err == nil {
		_, err1 := unix.InotifyAddWatch(fd, filepath.Dir(l.path), dirEvents)
		_, err2 := unix.InotifyAddWatch(fd, l.path, fileEvents)
		if err1 == nil && err2 == nil {
			w.ino = os.NewFile(uintptr(fd), "inotify") // non-blocking: reads wait in the runtime's poller
			names := []string{filepath.Base(l.path)}
			if l.keyPath != "" {
				names = append(names, filepath.Base(l.keyPath))
			}
			go w.run(l, names...)
		} else {
			unix.Close(fd)
		}
	}
	if errors.Is(l.check(), backend.ErrLost) {
		w.lose()
	}
}

func (w *watcher) run(l *lease, names ...string) {
	buf := make([]byte, 64*(unix.SizeofInotifyEvent+unix.NAME_MAX+1))
	for {
		n, err := w.ino.Read(buf)
		if err != nil {
			return // closed by stop, or broken: renewals still check
		}
		if !relevant(buf[:n], names) {
			continue
		}
		l.mu.Lock()
		err = l.check()
		l.mu.Unlock()
		if errors.Is(err, backend.ErrLost) {
			w.lose()
			return
		}
	}
}

// relevant tells whether events concern our files: any event on the file
// itself or the directory itself, or a directory entry of one of names (a
// semaphore holder's slot file and its key's lock file).
func relevant(buf []byte, names []string) bool {
	for len(buf) >= unix.SizeofInotifyEvent {
		ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[0]))
		end := unix.SizeofInotifyEvent + int(ev.Len)
		if end > len(buf) {
			return true
		}
		entry := string(bytes.TrimRight(buf[unix.SizeofInotifyEvent:end], "\x00"))
		if ev.Len == 0 || slices.Contains(names, entry) || ev.Mask&unix.IN_Q_OVERFLOW != 0 {
			return true
		}
		buf = buf[end:]
	}
	return false
}

func (w *watcher) lose() {
	w.stop()
	w.lostOnce.Do(func() { close(w.lost) })
}

// stop ends the watch, without waiting for the kernel to tear it down;
// safe on a nil watcher, before start and more than once.
func (w *watcher) stop() {
	if w == nil || w.ino == nil {
		return
	}
	w.stopOnce.Do(func() { go w.ino.Close() })
}
