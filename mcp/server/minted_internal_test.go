package server

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/store"
	"github.com/toolgen/toolgen/runtime/store/sqlite"
)

// Minted ids sort by the millisecond they were minted in, byte for byte as an index
// compares them (issue 20: the records of a client that never echoes its session
// append to the session and breaker indexes), and keep the minted form.
func TestMintedRandom_SortsByTheMillisecond(t *testing.T) {
	now := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC).UnixMilli()
	millis := []int64{0, 1, 31, 32, 33, 1023, 1024, now, now + 1, now + 1000, time.Date(3000, 1, 1, 0, 0, 0, 0, time.UTC).UnixMilli(), 1<<45 - 1}
	prev := ""
	for _, ms := range millis {
		r := mintedRandom(time.UnixMilli(ms).Add(999 * time.Microsecond))
		if len(r) != mintedRandomLen || !isMintedForm(MintedSessionPrefix+r+strings.Repeat("A", mintedMACLen)) {
			t.Fatalf("millisecond %d: %q is not of the minted form", ms, r)
		}
		if r <= prev {
			t.Fatalf("millisecond %d: %q sorts at or before the earlier one's %q", ms, r, prev)
		}
		if again := mintedRandom(time.UnixMilli(ms)); again[:mintedTimeLen] != r[:mintedTimeLen] || again == r {
			t.Fatalf("millisecond %d: %q and %q: want the same millisecond and different random characters", ms, r, again)
		}
		prev = r
	}
}

// BenchmarkMintedSessionRecords writes the record of a read call whose client never
// echoes its session, so every call is a session (and a run) of its own, into an
// embedded store that holds 50,000 such records already: with the session ids mint
// makes ("by-millisecond") and with ids random throughout, as they were before
// ("random"). The difference is where the record's session and breaker index entries
// go: the indexes' right edge, or a random leaf each.
//
//	go test -run XXX -bench BenchmarkMintedSessionRecords -count 3 ./mcp/server/
func BenchmarkMintedSessionRecords(b *testing.B) {
	schemes := []struct {
		name   string
		random func() string
	}{
		{"random", rand.Text},
		{"by-millisecond", func() string { return mintedRandom(time.Now()) }},
	}
	for _, scheme := range schemes {
		b.Run(scheme.name, func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "toolgen.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			record := func() {
				session := MintedSessionPrefix + scheme.random() + rand.Text()[:mintedMACLen]
				key := sha256.Sum256([]byte(session))
				args := sha256.Sum256([]byte(`{"key":"k"}`))
				c := store.Call{Key: hex.EncodeToString(key[:]), Tenant: "acme", Principal: "alice", SessionID: session, RunID: session,
					Step: 1, CallID: "call-1", Tool: "bench__lookup", ToolVersion: 1, Idempotency: "idempotent",
					Args: json.RawMessage(`{"key":"k"}`), ArgsHash: hex.EncodeToString(args[:]), OriginTrust: "tool",
					ArgumentTrust: "user", Mode: "default", Decision: "allow"}
				s := store.Settlement{Status: store.StatusSucceeded, Outcome: json.RawMessage(`{"ok":true}`)}
				if _, _, err := st.InvocationInsert(ctx, store.InsertRecordOnce(c, s)); err != nil {
					b.Fatal(err)
				}
			}
			for range 50_000 {
				record()
			}
			for b.Loop() {
				record()
			}
		})
	}
}
