package app

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/lockrun/lockrun/backend"
)

// semaphore is a key of limit 3 held by two runs.
func semaphore(now time.Time) backend.Status {
	h := func(name, run string, tok backend.Token) backend.Status {
		return backend.Status{Key: "deploy", Held: true, Holder: name, RunID: run, Token: tok, TTL: 20 * time.Second,
			Since: now.Add(-time.Minute), Renewed: now.Add(-time.Second), Info: backend.HolderInfo{User: "ops"}}
	}
	holders := []backend.Status{h("a:1", "RUNA", 10), h("b:2", "RUNB", 11)}
	s := holders[0]
	s.Limit, s.Holders = 3, holders
	return s
}

func TestDescribeASemaphore(t *testing.T) {
	now := time.Now()
	got := describe(semaphore(now), now)
	lines := strings.Split(strings.TrimSpace(got), "\n")
	if lines[0] != "deploy: 2 of 3 held" || strings.Count(got, "deploy: held by ") != 2 ||
		!strings.Contains(got, "held by a:1 (token 10, run RUNA") || !strings.Contains(got, "held by b:2 (token 11, run RUNB") ||
		strings.Count(got, "since:") != 2 {
		t.Errorf("describe of a semaphore:\n%s\nwant a count line, then each holder's block", got)
	}
	if got := heldBy(semaphore(now), now); !strings.HasPrefix(got, "2 of 3 holders: a:1 since") || !strings.Contains(got, "; b:2 since") {
		t.Errorf("heldBy of a semaphore = %q", got)
	}
}

func TestStatusJSONGivesLimitAndHolders(t *testing.T) {
	now := time.Now()
	type doc struct {
		Held    bool
		Token   uint64
		Limit   int
		Holders []struct {
			Token uint64
			RunID string `json:"run_id"`
		}
	}
	decode := func(s backend.Status) doc {
		var d doc
		b, _ := json.Marshal(statusJSON(s))
		if err := json.Unmarshal(b, &d); err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := decode(semaphore(now)); d.Limit != 3 || len(d.Holders) != 2 || d.Holders[1].Token != 11 || d.Holders[1].RunID != "RUNB" || d.Token != 10 {
		t.Errorf("semaphore: %+v", d)
	}
	plain := semaphore(now).Holders[0]
	if d := decode(plain); d.Limit != 1 || len(d.Holders) != 1 || d.Holders[0].Token != 10 {
		t.Errorf("plain lock: %+v; want limit 1 and itself as the one holder", d)
	}
	if d := decode(backend.Status{Key: "k", Token: 5}); d.Limit != 0 || d.Holders == nil || len(d.Holders) != 0 || d.Held {
		t.Errorf("free key: %+v; want limit 0 and no holders", d)
	}
}

func TestListHasARowPerHolder(t *testing.T) {
	now := time.Now()
	var b bytes.Buffer
	if err := table(&b, []backend.Status{semaphore(now), semaphore(now).Holders[0]}, now); err != nil {
		t.Fatal(err)
	}
	rows := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(rows) != 4 || !strings.HasSuffix(rows[0], "SLOTS") || !strings.HasSuffix(rows[1], "2/3") ||
		!strings.Contains(rows[2], "b:2") || !strings.HasSuffix(rows[2], "2/3") || !strings.HasSuffix(rows[3], "1/1") {
		t.Errorf("list:\n%s\nwant a row per holder, each with its key's slots", b.String())
	}
}

func TestSameHoldersAfterTheQuestion(t *testing.T) {
	now := time.Now()
	s := semaphore(now)
	one := breaking{key: "deploy", holders: s.Holders[1:]}
	every := breaking{key: "deploy", holders: s.Holders, all: true}
	joined := append(s.Holders[:2:2], backend.Status{Token: 12, RunID: "RUNC"})
	for _, c := range []struct {
		br   breaking
		now  []backend.Status
		want bool
	}{
		{one, s.Holders, true},
		{one, s.Holders[:1], false},   // the holder went
		{one, joined, true},           // another joined: this one is still there
		{every, s.Holders, true},      //
		{every, joined, false},        // --all would break one not shown
		{every, s.Holders[1:], false}, // one went: look again
	} {
		if got := sameHolders(c.br, c.now); got != c.want {
			t.Errorf("sameHolders(%d holders, all %v; %d now) = %v", len(c.br.holders), c.br.all, len(c.now), got)
		}
	}
}

func TestLimitErrorExits78(t *testing.T) {
	if got := exitCode(&backend.LimitError{Key: "k", Want: 2, Have: 1}); got != ExitConfig {
		t.Errorf("exitCode(LimitError) = %d, want %d", got, ExitConfig)
	}
}

func TestMetricsGiveTheLimit(t *testing.T) {
	for limit, want := range map[int]string{0: "1", 1: "1", 4: "4"} {
		text := formatMetrics(runFigures{key: "k", limit: limit, end: time.Now()}, 0)
		if !strings.Contains(text, "\nlockrun_limit{key=\"k\"} "+want+"\n") {
			t.Errorf("limit %d: metrics\n%s\nwant lockrun_limit %s", limit, text, want)
		}
	}
}

// many is a key of limit n held by n runs.
func many(n int, now time.Time) backend.Status {
	s := semaphore(now)
	s.Limit, s.Holders = n, nil
	for i := range n {
		h := s
		h.Limit, h.Holder, h.RunID, h.Token = 0, fmt.Sprintf("host-%d:%d", i, 1000+i), fmt.Sprintf("RUN%d", i), backend.Token(10+i)
		s.Holders = append(s.Holders, h)
	}
	return s
}

// A waiter's line, a timeout's error and release's "name one" refusal
// name a few holders and count the rest: at --limit 1000 they were one
// line of 60 KB each.
func TestManyHoldersAreCounted(t *testing.T) {
	now := time.Now()
	s := many(1000, now)
	got := heldBy(s, now)
	if len(got) > 1000 || !strings.HasPrefix(got, "1000 of 1000 holders: host-0:1000 since") || !strings.Contains(got, "and 995 more") {
		t.Errorf("heldBy of 1000 holders: %d bytes, %.300q...; want the count, the first 5 and \"and 995 more\"", len(got), got)
	}
	got = holderList(s.All())
	if len(got) > 1000 || !strings.HasPrefix(got, "host-0:1000 (token 10, run RUN0)") || !strings.Contains(got, "and 995 more") {
		t.Errorf("holderList of 1000 holders: %d bytes, %.300q...; want the first 5 and \"and 995 more\"", len(got), got)
	}
	if got := heldBy(many(5, now), now); strings.Contains(got, "more") || strings.Count(got, "host-") != 5 {
		t.Errorf("heldBy of 5 holders: %q; want all 5, nothing counted", got)
	}
}
