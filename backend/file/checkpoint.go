package file

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"syscall"

	"github.com/lockrun/lockrun/backend"
	"github.com/lockrun/lockrun/internal/randtext"
)

var _ backend.Checkpointer = (*Backend)(nil)

// checkpointMagic starts a checkpoint file: the magic, the token that
// wrote it, a newline, then the value.
const checkpointMagic = "lockrun-checkpoint "

func (b *Backend) checkpointPath(key string) string { return b.path(key) + ".checkpoint" }

// SetCheckpoint stores value when key's lock file is flocked by a holder
// whose record has token and whose run was not revoked. The new file is
// written and synced under a fresh name, then renamed over the old one, so
// a crash leaves the old checkpoint or the new one, never a torn one.
//
// Check and write are not one system call: they are one step because a new
// token is only issued under the flock, which the caller's process (the
// holder, lockrun itself) keeps until its command is dead.
func (b *Backend) SetCheckpoint(ctx context.Context, key string, token backend.Token, value []byte) error {
	if err := backend.ValidateCheckpoint(key, token, value); err != nil {
		return err
	}
	if err := b.checkHolder(key, token); err != nil {
		return err
	}
	data := append([]byte(checkpointMagic+token.String()+"\n"), value...)
	return b.replace(b.checkpointPath(key), data)
}

// checkHolder returns nil when key is flocked and its record, not revoked,
// has token; otherwise an error wrapping backend.ErrLost.
func (b *Backend) checkHolder(key string, token backend.Token) error {
	f, err := b.openLock(key, true, false)
	if errors.Is(err, errMissing) {
		return b.refused(key, token)
	}
	if err != nil {
		return err
	}
	defer f.Close()
	rec, _, err := readState(f)
	if err != nil {
		return fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	if rec.Token != token || rec.Limit > 1 || readRevoked(f) == rec.RunID { // a semaphore's holders keep no checkpoint
		return b.refused(key, token)
	}
	// A shared flock that we can take means nobody holds the lock.
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB)
	if err == nil {
		return b.refused(key, token)
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return fmt.Errorf("%w: %s: %w", backend.ErrUnavailable, f.Name(), err)
	}
	return nil
}

func (b *Backend) refused(key string, token backend.Token) error {
	return fmt.Errorf("%w: checkpoint of %q refused: token %v is not the holder's", backend.ErrLost, key, token)
}

// replace writes data to a new file beside path, syncs it and renames it
// over path. The new file is created exclusively and never followed.
func (b *Backend) replace(path string, data []byte) error {
	suffix, err := randtext.Text()
	if err != nil {
		return err
	}
	tmp := path + ".tmp-" + suffix[:10]
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, os.FileMode(b.fileMode))
	if err != nil {
		return openError(tmp, err, false)
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(os.FileMode(b.fileMode)) // as lock files: past the umask
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("%w: writing %s: %w", backend.ErrUnavailable, path, err)
	}
	return nil
}

// GetCheckpoint reads key's checkpoint file.
func (b *Backend) GetCheckpoint(ctx context.Context, key string) (backend.Checkpoint, bool, error) {
	if err := backend.ValidateKey(key); err != nil {
		return backend.Checkpoint{}, false, err
	}
	path := b.checkpointPath(key)
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return backend.Checkpoint{}, false, nil
	}
	if err != nil {
		return backend.Checkpoint{}, false, openError(path, err, true)
	}
	defer f.Close()
	if err := b.trustFile(f, true); err != nil {
		return backend.Checkpoint{}, false, err
	}
	raw, err := io.ReadAll(io.LimitReader(f, int64(len(checkpointMagic)+21+backend.MaxCheckpoint)))
	if err != nil {
		return backend.Checkpoint{}, false, fmt.Errorf("%w: reading %s: %w", backend.ErrUnavailable, path, err)
	}
	head, value, ok := bytes.Cut(raw, []byte("\n"))
	tok, isOurs := bytes.CutPrefix(head, []byte(checkpointMagic))
	t, err := strconv.ParseUint(string(tok), 10, 64)
	if !ok || !isOurs || err != nil {
		return backend.Checkpoint{}, false, fmt.Errorf("%w: %s is not a lockrun checkpoint", backend.ErrUnavailable, path)
	}
	return backend.Checkpoint{Value: value, Token: backend.Token(t)}, true, nil
}

// ClearCheckpoint removes key's checkpoint file.
func (b *Backend) ClearCheckpoint(ctx context.Context, key string) error {
	if err := backend.ValidateKey(key); err != nil {
		return err
	}
	err := os.Remove(b.checkpointPath(key))
	if err == nil || errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return openError(b.checkpointPath(key), err, false)
}
