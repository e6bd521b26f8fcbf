package zookeeper

import (
	"encoding/json"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// contender is the data of a lockrun contender node: who queued, and, once
// it holds the lock, when it was granted and last renewed and its token.
// Nodes of other clients (Curator stores an address) do not parse.
type contender struct {
	Holder  string             `json:"holder,omitempty"`
	RunID   string             `json:"run_id"`
	Info    backend.HolderInfo `json:"info"`
	Token   uint64             `json:"token,omitempty"`
	Since   int64              `json:"since_us,omitempty"` // grant, µs since the epoch
	Renewed int64              `json:"renewed_us,omitempty"`
	// Revoked is set by Revoke (`lockrun release`): the holder is to stop;
	// older lockruns neither write nor read it.
	Revoked bool `json:"revoked,omitempty"`
}

// state is a key's record below R/.state: the last token issued, and while
// a released lock is kept for its min-hold, until when and for whom. A
// plain lock's hold is the flat fields (as older lockruns wrote them); a
// semaphore's released slots kept for their min-hold are Holds, of the
// semaphore's Limit.
type state struct {
	Token     uint64             `json:"token"`
	HoldUntil int64              `json:"hold_until_us,omitempty"`
	Holder    string             `json:"holder,omitempty"`
	RunID     string             `json:"run_id,omitempty"`
	Info      backend.HolderInfo `json:"info"`
	Since     int64              `json:"since_us,omitempty"`
	Limit     int                `json:"limit,omitempty"`
	Holds     []hold             `json:"holds,omitempty"`
}

// hold is one semaphore slot kept taken after its release, for its
// holder's min-hold.
type hold struct {
	Until  int64              `json:"until_us"`
	Token  uint64             `json:"token"`
	Holder string             `json:"holder,omitempty"`
	RunID  string             `json:"run_id"`
	Info   backend.HolderInfo `json:"info"`
	Since  int64              `json:"since_us,omitempty"`
}

// held tells whether the record keeps the lock taken at now as a plain
// lock.
func (s state) held(now time.Time) bool { return s.HoldUntil > now.UnixMicro() }

// holds is the semaphore slots the record keeps taken at now, leaving out
// those of run (a retry of that run may take its slot back).
func (s state) holds(now time.Time, run string) []hold {
	var out []hold
	for _, h := range s.Holds {
		if h.Until > now.UnixMicro() && h.RunID != run {
			out = append(out, h)
		}
	}
	return out
}

// limitAt is the limit the record's holds at now keep the key with: 1
// for a plain lock's, the semaphore's for its slots, 0 for none (run's
// own holds left out).
func (s state) limitAt(now time.Time, run string) int {
	switch {
	case s.held(now) && s.RunID != run:
		return 1
	case len(s.holds(now, run)) > 0:
		return s.Limit
	}
	return 0
}

// granted is the record after a grant of token at now to run: the token,
// and the semaphore slots still kept for others. A plain lock's grant
// drops everything else, as it did before semaphores: its record is
// {"token":T,"info":{}}, byte for byte.
func (s state) granted(token uint64, now time.Time, run string) state {
	next := state{Token: token}
	if h := s.holds(now, run); len(h) > 0 {
		next.Limit, next.Holds = s.Limit, h
	}
	return next
}

func encode(v any) []byte {
	b, _ := json.Marshal(v) // plain structs: cannot fail
	return b
}

// parseState reads a record; a missing or foreign one is the zero state.
func parseState(data []byte) state {
	var s state
	_ = json.Unmarshal(data, &s)
	return s
}

func parseContender(data []byte) (contender, bool) {
	var c contender
	return c, json.Unmarshal(data, &c) == nil && c.RunID != ""
}

// micros turns µs since the epoch into a time; 0 is the zero time.
func micros(us int64) time.Time {
	if us == 0 {
		return time.Time{}
	}
	return time.UnixMicro(us)
}

// nextToken is the token of a grant at now after last: at least the wall
// clock in µs, and above every token issued before.
func nextToken(last uint64, now time.Time) uint64 {
	return max(uint64(now.UnixMicro()), last+1)
}
