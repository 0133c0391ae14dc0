package runtime

import (
	"regexp"
	"testing"
)

var goldenKeyInput = KeyInput{
	Tenant:        "acme",
	RunID:         "run-0001",
	Step:          3,
	CallID:        "call_a1",
	Tool:          "workspace.write_text",
	ToolVersion:   2,
	CanonicalArgs: []byte(`{"mode":"overwrite","path":"notes/today.md","text":"hello"}`),
}

// The encoding is frozen under KeyVersion: a change here means every recorded key
// stops deduplicating its call. Bump KeyVersion (with a migration) instead. The
// golden values were computed independently (Python: hashlib.sha256 over
// struct.pack(">Q", len(b)) + b per field, and ">Q" 8 + ">q" n per integer).
func TestIdempotencyKeyGolden(t *testing.T) {
	const want = "b36e164bd89da0d5a4154e7393d79a1b3441c4a9041a24a5c11dcdd824c8cb1f"
	if got := IdempotencyKey(goldenKeyInput); got != want {
		t.Fatalf("IdempotencyKey(golden) = %s, want %s", got, want)
	}
	const wantArgs = "cfee051ecabe204f94639763050b6f8fef52845b53d10986c76c9824d976b851"
	if got := ArgsHash(goldenKeyInput.Tool, goldenKeyInput.CanonicalArgs); got != wantArgs {
		t.Fatalf("ArgsHash(golden) = %s, want %s", got, wantArgs)
	}
}

var hexSHA256 = regexp.MustCompile(`^[0-9a-f]{64}$`)

func TestIdempotencyKeyEveryFieldCounts(t *testing.T) {
	base := IdempotencyKey(goldenKeyInput)
	if !hexSHA256.MatchString(base) {
		t.Fatalf("key %q is not lower-case hex SHA-256", base)
	}
	if again := IdempotencyKey(goldenKeyInput); again != base {
		t.Fatal("key is not deterministic")
	}
	for name, mutate := range map[string]func(*KeyInput){
		"tenant":       func(k *KeyInput) { k.Tenant = "acme2" },
		"run id":       func(k *KeyInput) { k.RunID = "run-0002" },
		"step":         func(k *KeyInput) { k.Step = 4 },
		"negative":     func(k *KeyInput) { k.Step = -3 },
		"call id":      func(k *KeyInput) { k.CallID = "call_a2" },
		"tool":         func(k *KeyInput) { k.Tool = "workspace.read_text" },
		"tool version": func(k *KeyInput) { k.ToolVersion = 3 },
		"args": func(k *KeyInput) {
			k.CanonicalArgs = []byte(`{"mode":"overwrite","path":"notes/today.md","text":"hello!"}`)
		},
		"empty args": func(k *KeyInput) { k.CanonicalArgs = nil },
	} {
		in := goldenKeyInput
		mutate(&in)
		if got := IdempotencyKey(in); got == base {
			t.Errorf("changing the %s does not change the key", name)
		}
	}
}

// Length prefixes: moving bytes from one field to the next changes the key.
func TestIdempotencyKeyLengthPrefixed(t *testing.T) {
	pairs := [][2]KeyInput{
		{{Tenant: "ab", RunID: "c"}, {Tenant: "a", RunID: "bc"}},
		{{RunID: "r", CallID: "ab", Tool: "c"}, {RunID: "r", CallID: "a", Tool: "bc"}},
		{{Tool: "x.y", CanonicalArgs: []byte("{}")}, {Tool: "x.y{", CanonicalArgs: []byte("}")}},
		{{Tenant: "", RunID: "a"}, {Tenant: "a", RunID: ""}},
		{{Step: 1, ToolVersion: 2}, {Step: 2, ToolVersion: 1}},
	}
	for _, p := range pairs {
		if IdempotencyKey(p[0]) == IdempotencyKey(p[1]) {
			t.Errorf("%+v and %+v have the same key", p[0], p[1])
		}
	}
	if ArgsHash("ab", []byte("c")) == ArgsHash("a", []byte("bc")) {
		t.Error(`ArgsHash("ab", "c") == ArgsHash("a", "bc")`)
	}
}

func TestArgsHash(t *testing.T) {
	a := []byte(`{"path":"a"}`)
	h := ArgsHash("workspace.read_text", a)
	if !hexSHA256.MatchString(h) {
		t.Fatalf("args hash %q is not lower-case hex SHA-256", h)
	}
	if ArgsHash("workspace.read_text", []byte(`{"path":"b"}`)) == h || ArgsHash("workspace.list", a) == h {
		t.Error("the tool and the arguments must both change the hash")
	}
	// The identity of a call within a run ignores step, call id and version...
	k1, k2 := goldenKeyInput, goldenKeyInput
	k2.Step, k2.CallID, k2.ToolVersion = 9, "other", 7
	if IdempotencyKey(k1) == IdempotencyKey(k2) {
		t.Error("different calls share a key")
	}
	// ...and is never equal to a key over the same bytes.
	if ArgsHash(k1.Tool, k1.CanonicalArgs) == IdempotencyKey(KeyInput{Tool: k1.Tool, CanonicalArgs: k1.CanonicalArgs}) {
		t.Error("an args hash equals an idempotency key")
	}
}

func TestIdempotencyKeyAllocations(t *testing.T) {
	if n := testing.AllocsPerRun(100, func() { IdempotencyKey(goldenKeyInput) }); n > 1 {
		t.Errorf("IdempotencyKey: %v allocations, want at most 1 (the string)", n)
	}
	if n := testing.AllocsPerRun(100, func() { ArgsHash(goldenKeyInput.Tool, goldenKeyInput.CanonicalArgs) }); n > 1 {
		t.Errorf("ArgsHash: %v allocations, want at most 1 (the string)", n)
	}
}

func BenchmarkIdempotencyKey(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		IdempotencyKey(goldenKeyInput)
	}
}

func BenchmarkArgsHash(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		ArgsHash(goldenKeyInput.Tool, goldenKeyInput.CanonicalArgs)
	}
}
