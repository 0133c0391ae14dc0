package events

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/postgres"
	"github.com/toolgen/toolgen/runtime/store/postgres/pgtest"
)

// countingStore counts the EventList statements of the streams (the only statements a
// stream makes).
type countingStore struct {
	store.Store
	mu    sync.Mutex
	reads int
}

func (c *countingStore) EventList(ctx context.Context, f store.EventFilter) ([]store.Event, error) {
	c.mu.Lock()
	c.reads++
	c.mu.Unlock()
	return c.Store.EventList(ctx, f)
}

func (c *countingStore) Unwrap() store.Store { return c.Store }

func (c *countingStore) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.reads
}

// streamStates follows the streams through the handler's test hook: per stream (the
// X-Stream header), its reads and whether it now waits for longer than Poll.
type streamStates struct {
	mu    sync.Mutex
	cond  *sync.Cond
	reads map[int]int
	idle  map[int]bool
}

func newStreamStates() *streamStates {
	s := &streamStates{reads: map[int]int{}, idle: map[int]bool{}}
	s.cond = sync.NewCond(&s.mu)
	return s
}

func (s *streamStates) hook(r *http.Request, what string) {
	n, err := strconv.Atoi(r.Header.Get("X-Stream"))
	if err != nil {
		return
	}
	s.mu.Lock()
	switch what {
	case "read":
		s.reads[n]++
		s.idle[n] = false
	case "idle":
		s.idle[n] = true
	}
	s.cond.Broadcast()
	s.mu.Unlock()
}

// waitIdle blocks until every one of n streams waits for longer than Poll, and returns
// each one's reads so far.
func (s *streamStates) waitIdle(n int) map[int]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		all := true
		for i := range n {
			if !s.idle[i] {
				all = false
				break
			}
		}
		if all {
			out := make(map[int]int, n)
			for i := range n {
				out[i] = s.reads[i]
			}
			return out
		}
		s.cond.Wait()
	}
}

// waitReads blocks until every one of n streams has read the store at least want times.
func (s *streamStates) waitReads(n, want int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		all := true
		for i := range n {
			if s.reads[i] < want {
				all = false
				break
			}
		}
		if all {
			return
		}
		s.cond.Wait()
	}
}

// received counts, per stream, the events its client received.
type received struct {
	mu   sync.Mutex
	cond *sync.Cond
	n    map[int]int
}

func (rc *received) add(stream int) {
	rc.mu.Lock()
	rc.n[stream]++
	rc.cond.Broadcast()
	rc.mu.Unlock()
}

// waitFor blocks until every stream in streams received want events.
func (rc *received) waitFor(streams []int, want int) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	for {
		all := true
		for _, i := range streams {
			if rc.n[i] < want {
				all = false
				break
			}
		}
		if all {
			return
		}
		rc.cond.Wait()
	}
}

// openStreams opens n streams of srvURL, stream i filtered to tenant "t<i%tenants>",
// each read by a goroutine that counts its events in rc.
func openStreams(t testing.TB, ctx context.Context, srvURL string, n, tenants int, rc *received) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	t.Cleanup(client.CloseIdleConnections)
	for i := range n {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("%s?tenant=t%d", srvURL, i%tenants), nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("X-Stream", strconv.Itoa(i))
		resp, err := client.Do(req)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		go func() {
			defer resp.Body.Close()
			sc := bufio.NewScanner(resp.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data:") {
					rc.add(i)
				}
			}
		}()
	}
}

// TestIdleStreams_NoQueriesBetweenEvents_Postgres: 1,000 idle /events streams on one
// PostgreSQL store make no query at all while no event of theirs is written (the
// fallback interval is an hour here; it is seconds by default), and an event wakes
// exactly the streams of its tenant, whichever process wrote it: each reads once (or
// twice, when the event was not yet readable at the first read), the others not at
// all. Counted in statements, not in time.
func TestIdleStreams_NoQueriesBetweenEvents_Postgres(t *testing.T) {
	const streams, tenants = 1000, 10
	writer, schema := pgtest.Open(t) // another process's store: it writes the events
	st, err := postgres.Open(t.Context(), pgtest.DSN(t), postgres.WithSchema(schema), postgres.WithWakeFallback(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	counting := &countingStore{Store: st}
	h, srv := newServer(t, counting, Options{})
	states := newStreamStates()
	h.testHook = states.hook
	rc := &received{n: map[int]int{}}
	rc.cond = sync.NewCond(&rc.mu)
	// The listener listens and the tenants' topics are registered before the streams
	// open, so no stream is woken by the topic becoming ready: from its first read on,
	// only an event of its tenant wakes it.
	for i := range tenants {
		sub := st.Subscribe(store.EventsTopic(fmt.Sprintf("t%d", i)))
		defer sub.Close()
		<-sub.Ready()
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	openStreams(t, ctx, srv.URL, streams, tenants, rc)

	before := states.waitIdle(streams)
	reads0, stats0 := counting.count(), st.WakeStats()
	t.Logf("%d streams idle after %d reads; listener: %+v", streams, reads0, stats0)

	for round, tenant := range []int{3, 7, 3} {
		if _, err := writer.EventAppend(t.Context(), store.Event{Kind: "device_connected", Tenant: fmt.Sprintf("t%d", tenant), Server: "dev"}); err != nil {
			t.Fatal(err)
		}
		var woken []int
		for i := tenant; i < streams; i += tenants {
			woken = append(woken, i)
		}
		rc.waitFor(woken, 1+round/2) // t3 receives its second event in round 2
		after := states.waitIdle(streams)
		readsOfTenant := 0
		for i := range streams {
			d := after[i] - before[i]
			switch {
			case i%tenants == tenant:
				if d < 1 || d > 2 {
					t.Errorf("round %d: stream %d of the event's tenant read %d times, want 1 or 2", round, i, d)
				}
				readsOfTenant += d
			case d != 0:
				t.Errorf("round %d: stream %d of tenant t%d read %d times after an event of t%d, want 0", round, i, i%tenants, d, tenant)
			}
		}
		t.Logf("round %d: an event of t%d: %d reads by its %d streams, 0 by the other %d", round, tenant, readsOfTenant,
			len(woken), streams-len(woken))
		before = after
	}
	reads1, stats1 := counting.count(), st.WakeStats()
	if d := reads1 - reads0; d > 2*3*streams/tenants {
		t.Errorf("%d EventList statements for 3 events of 100 streams each, want at most %d", d, 2*3*streams/tenants)
	}
	// the listener: its refreshes (one every 10 s) and nothing per stream
	if d := stats1.Statements - stats0.Statements; d > 10 {
		t.Errorf("the listener ran %d statements meanwhile", d)
	}
	t.Logf("store statements by the streams for 3 events: %d; listener: %d statements, %d notifications",
		reads1-reads0, stats1.Statements-stats0.Statements, stats1.Notifications-stats0.Notifications)
}

// BenchmarkIdleStreams: the statements 1,000 idle /events streams (10 tenants) make
// on PostgreSQL in a window without events (TOOLGEN_BENCH_IDLE, default 20s): with
// wake-ups at the default fallback interval (postgres.DefaultWakeFallback) against
// the same streams polling every 200 ms (postgres.WithoutWakeups, the behaviour
// before), in the same run. Reported per second, the listener's own statements
// included.
//
//	TOOLGEN_PG_DSN=... go test -run XXX -bench BenchmarkIdleStreams -benchtime 1x ./internal/events/
func BenchmarkIdleStreams(b *testing.B) {
	window := 20 * time.Second
	if v := os.Getenv("TOOLGEN_BENCH_IDLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatal(err)
		}
		window = d
	}
	b.Run("postgres/notify", func(b *testing.B) { benchIdleStreams(b, window, true) })
	b.Run("postgres/poll-200ms", func(b *testing.B) { benchIdleStreams(b, window, false) })
}

func benchIdleStreams(b *testing.B, window time.Duration, wake bool) {
	const streams, tenants = 1000, 10
	_, schema := pgtest.Open(b)
	opts := []postgres.Option{postgres.WithSchema(schema)}
	if !wake {
		opts = append(opts, postgres.WithoutWakeups())
	}
	st, err := postgres.Open(context.Background(), pgtest.DSN(b), opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	counting := &countingStore{Store: st}
	o := Options{Store: counting}
	h, err := NewHandler(o)
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer func() { h.Close(); srv.Close() }()
	states := newStreamStates()
	h.testHook = states.hook
	rc := &received{n: map[int]int{}}
	rc.cond = sync.NewCond(&rc.mu)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for range b.N {
		openStreams(b, ctx, srv.URL, streams, tenants, rc)
		if wake {
			states.waitIdle(streams)
		} else {
			states.waitReads(streams, 2)
		}
		reads0, stats0 := counting.count(), st.WakeStats()
		time.Sleep(window) // the measured window: nothing is written
		reads, stats := counting.count()-reads0, st.WakeStats()
		listener := stats.Statements - stats0.Statements
		secs := window.Seconds()
		b.ReportMetric(float64(reads)/secs, "stream-queries/s")
		b.ReportMetric(float64(listener)/secs, "listener-queries/s")
		b.ReportMetric(float64(reads)/secs/streams*60, "queries/stream/min")
	}
}
