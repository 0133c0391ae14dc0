package runtime

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"math/rand"
	"sync"
	"testing"

	"github.com/toolgen/toolgen/internal/canonjson/canonjsontest"
)

// FuzzIdempotencyKey checks RT-5 on any arguments document: the key is computed over
// the canonical arguments, so writing the same arguments with the members of every
// object in another order and other whitespace (and other escapes and number
// spellings) never changes the key or the args hash; and within the fuzzing process
// no two different inputs share a key, no two different argument values share
// canonical bytes, and no two different (tool, arguments) share an args hash.
//
//	go test -run XXX -fuzz FuzzIdempotencyKey -fuzztime 60s ./runtime/
func FuzzIdempotencyKey(f *testing.F) {
	for i, s := range canonjsontest.Corpus {
		f.Add([]byte(s), "acme", fmt.Sprintf("run-%d", i), i, "call_1", "demo.echo", 1)
	}
	f.Add([]byte(canonjsontest.BenchArgs), "acme", "run-1", 3, "call_a1", "workspace.write_text", 2)
	f.Add([]byte(`{"b":[1,{"d":null,"c":"x"}],"a":1e2}`), "", "", -1, "", "", 0)
	f.Add([]byte(`{"a":1}`), "ab", "c", 0, "", "x.y", 1)
	f.Add([]byte(`{"a":1}`), "a", "bc", 0, "", "x.y", 1)
	f.Add([]byte(`{"\ud83d\ude00":1,"\uffff":2,"z":3}`), "t", "r", 1<<40, "c", "x.y", -7)
	f.Fuzz(func(t *testing.T, args []byte, tenant, runID string, step int, callID, tool string, version int) {
		canon, err := CanonicalJSON(args)
		if err != nil {
			return
		}
		in := KeyInput{Tenant: tenant, RunID: runID, Step: step, CallID: callID, Tool: tool, ToolVersion: version, CanonicalArgs: canon}
		key := IdempotencyKey(in)
		if !hexSHA256.MatchString(key) {
			t.Fatalf("key %q is not lower-case hex SHA-256", key)
		}
		if again := IdempotencyKey(in); again != key {
			t.Fatalf("key is not deterministic: %s then %s", key, again)
		}
		hash := ArgsHash(tool, canon)

		// Other key order, whitespace, escapes and number spellings: same key.
		h := fnv.New64a()
		h.Write(args)
		rng := rand.New(rand.NewSource(int64(h.Sum64())))
		for range 4 {
			other := canonjsontest.Respell(t, rng, args)
			oc, err := CanonicalJSON(other)
			if err != nil {
				t.Fatalf("%q is accepted but its respelling %q is not: %v", args, other, err)
			}
			in2 := in
			in2.CanonicalArgs = oc
			if k := IdempotencyKey(in2); k != key {
				t.Fatalf("respelling the arguments %q as %q changes the key:\n%s (canonical %q)\n%s (canonical %q)", args, other, key, canon, k, oc)
			}
			if ah := ArgsHash(tool, oc); ah != hash {
				t.Fatalf("respelling the arguments %q as %q changes the args hash", args, other)
			}
		}

		fuzzKeys.check(t, key, hash, in, args)
	})
}

// keyCorpus remembers what the fuzzing process has seen, to find collisions between
// inputs of one run. It stops remembering after keyCorpusMaxBytes, so a long campaign
// cannot exhaust memory; it keeps checking against what it has.
type keyCorpus struct {
	mu    sync.Mutex
	bytes int
	keys  map[string]string // idempotency key -> the input it was computed from
	canon map[string][]byte // canonical arguments -> the arguments document they came from
	args  map[string]string // args hash -> tool and canonical arguments
}

const keyCorpusMaxBytes = 64 << 20

var fuzzKeys = keyCorpus{keys: map[string]string{}, canon: map[string][]byte{}, args: map[string]string{}}

func (c *keyCorpus) check(t *testing.T, key, hash string, in KeyInput, args []byte) {
	t.Helper()
	// %q keeps the fields apart: two different inputs never print alike.
	id := fmt.Sprintf("tenant=%q run=%q step=%d call=%q tool=%q version=%d args=%q",
		in.Tenant, in.RunID, in.Step, in.CallID, in.Tool, in.ToolVersion, in.CanonicalArgs)
	toolArgs := fmt.Sprintf("tool=%q args=%q", in.Tool, in.CanonicalArgs)
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.keys[key]; ok && prev != id {
		t.Fatalf("two inputs share the idempotency key %s:\n%s\n%s", key, prev, id)
	}
	if prev, ok := c.args[hash]; ok && prev != toolArgs {
		t.Fatalf("two calls share the args hash %s:\n%s\n%s", hash, prev, toolArgs)
	}
	if prev, ok := c.canon[string(in.CanonicalArgs)]; ok && !bytes.Equal(prev, args) && !canonjsontest.SemanticEqual(t, prev, args) {
		t.Fatalf("different arguments %q and %q have the same canonical form %q", prev, args, in.CanonicalArgs)
	}
	if c.bytes > keyCorpusMaxBytes {
		return
	}
	if _, ok := c.keys[key]; !ok {
		c.keys[key] = id
		c.bytes += len(key) + len(id)
	}
	if _, ok := c.args[hash]; !ok {
		c.args[hash] = toolArgs
		c.bytes += len(hash) + len(toolArgs)
	}
	if _, ok := c.canon[string(in.CanonicalArgs)]; !ok {
		c.canon[string(in.CanonicalArgs)] = bytes.Clone(args)
		c.bytes += len(in.CanonicalArgs) + len(args)
	}
}
