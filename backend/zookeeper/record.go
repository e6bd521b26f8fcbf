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
}

// state is a key's record below R/.state: the last token issued, and while
// a released lock is kept for its min-hold, until when and for whom.
type state struct {
	Token     uint64             `json:"token"`
	HoldUntil int64              `json:"hold_until_us,omitempty"`
	Holder    string             `json:"holder,omitempty"`
	RunID     string             `json:"run_id,omitempty"`
	Info      backend.HolderInfo `json:"info"`
	Since     int64              `json:"since_us,omitempty"`
}

// held tells whether the record keeps the lock taken at now.
func (s state) held(now time.Time) bool { return s.HoldUntil > now.UnixMicro() }

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
