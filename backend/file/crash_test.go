package file

// abandon closes the file as a crash would, without any bookkeeping.
func (l *lease) abandon() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f != nil {
		_ = l.f.Close()
		l.f = nil
	}
	if l.key != nil {
		_ = l.key.Close()
		l.key = nil
	}
}
