package canonjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/toolgen/toolgen/internal/canonjson/canonjsontest"
)

func TestCanonicalJSON(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		// Structure and whitespace.
		{` { "b" : 1 , "a" : [ true , false , null ] } `, `{"a":[true,false,null],"b":1}`},
		{"\t\r\n[]\n", `[]`},
		{`{}`, `{}`},
		{`{"a":{"d":1,"c":{"f":[],"e":{}}},"":0}`, `{"":0,"a":{"c":{"e":{},"f":[]},"d":1}}`},
		{`"x"`, `"x"`},
		{`null`, `null`},
		// Numbers: one spelling per value.
		{`[1, 1.0, 1e0, 1E0, 10e-1, 0.1e1, 1.000e+0]`, `[1,1,1,1,1,1,1]`},
		{`[0, -0, 0.0, -0.0e5, 0e-999999999999]`, `[0,0,0,0,0]`},
		{`[100, 1e2, 1.5e2, 12.5e1, -3.25]`, `[100,100,150,125,-3.25]`},
		{`[0.000001, 1e-6, 0.0000001, 1e-7, 123e-9]`, `[0.000001,0.000001,1e-7,1e-7,1.23e-7]`},
		{`[1e20, 1e21, 100000000000000000000000, 1e23, 12345678901234567890123]`,
			`[100000000000000000000,1e+21,1e+23,1e+23,1.2345678901234567890123e+22]`},
		// Integers beyond 2^53 keep their digits; they are not rounded to a float64.
		{`[9007199254740992, 9007199254740993, 18446744073709551615, -9223372036854775808]`,
			`[9007199254740992,9007199254740993,18446744073709551615,-9223372036854775808]`},
		{`[9007199254740993.0, 9.007199254740993e15]`, `[9007199254740993,9007199254740993]`},
		{`0.30000000000000001`, `0.30000000000000001`},
		{`1.7976931348623157e308`, `1.7976931348623157e+308`},
		{`1e-99999`, `1e-99999`},
		// Strings: escapes decoded, then the minimal RFC 8785 escapes.
		{`"\u0041\u00e9\/\"\\"`, `"Aé/\"\\"`},
		{`"\b\f\n\r\t\u0000\u001f\u007f"`, `"\b\f\n\r\t\u0000\u001f` + "\x7f" + `"`},
		{`"\u2028\u2029<>&"`, "\"\u2028\u2029<>&\""},
		{`"\ud83d\ude00😀"`, `"😀😀"`},
		{`"\uD83D\uDE00"`, `"😀"`},
		// RFC 8785 section 3.2.2 (the numbers, except the first, below).
		{`{"numbers":[1E30,4.50,2e-3,0.000000000000000000000000001],"string":"\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/","literals":[null,true,false]}`,
			`{"literals":[null,true,false],"numbers":[1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}`},
		// RFC 8785's 333333333.33333329 is rounded to a float64 there (333333333.3333333);
		// its digits are kept here.
		{`333333333.33333329`, `333333333.33333329`},
		{`333333333.3333333`, `333333333.3333333`},
	} {
		got, err := Canonical([]byte(c.in))
		if err != nil {
			t.Errorf("Canonical(%s): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("Canonical(%s)\n got  %s\n want %s", c.in, got, c.want)
		}
	}
}

// RFC 8785 section 3.2.3: member names are sorted by UTF-16 code units.
func TestCanonicalJSONKeyOrderUTF16(t *testing.T) {
	in := `{
  "\u20ac": "Euro Sign",
  "\r": "Carriage Return",
  "\ufb33": "Hebrew Letter Dalet With Dagesh",
  "1": "One",
  "\ud83d\ude00": "Emoji: Grinning Face",
  "\u0080": "Control",
  "\u00f6": "Latin Small Letter O With Diaeresis"
}`
	want := "{\"\\r\":\"Carriage Return\",\"1\":\"One\",\"\u0080\":\"Control\",\"\u00f6\":\"Latin Small Letter O With Diaeresis\"," +
		"\"\u20ac\":\"Euro Sign\",\"\U0001f600\":\"Emoji: Grinning Face\",\"\ufb33\":\"Hebrew Letter Dalet With Dagesh\"}"
	got, err := Canonical([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Names that are escaped in the output sort by their value, not their escape.
	got, err = Canonical([]byte(`{"\"":1,"\n":2,"!":3,"#":4,"\\":5}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"\n":2,"!":3,"\"":1,"#":4,"\\":5}`; string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// More members than the insertion sort handles.
	var b strings.Builder
	b.WriteString("{")
	for i := 40; i > 0; i-- {
		if i < 40 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `"k%02d":%d`, i, i)
	}
	b.WriteString("}")
	got, err = Canonical([]byte(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	dec := json.NewDecoder(bytes.NewReader(got))
	dec.Token()
	for dec.More() {
		k, _ := dec.Token()
		keys = append(keys, k.(string))
		var v any
		dec.Decode(&v)
	}
	if len(keys) != 40 || !slices.IsSorted(keys) {
		t.Fatalf("keys not sorted: %v", keys)
	}
}

func TestCompareUTF16(t *testing.T) {
	runes := []rune{0, 'a', 0x7f, 0x80, 0x7ff, 0x800, 0xd7ff, 0xe000, 0xfb33, 0xffff, 0x10000, 0x1f600, 0x10ffff}
	enc := func(s string) []uint16 { return utf16Units(s) }
	for _, a := range runes {
		for _, b := range runes {
			for _, suffix := range []string{"", "x", string(rune(0x1f600))} {
				sa, sb := string(a)+suffix, string(b)
				want := slices.Compare(enc(sa), enc(sb))
				if got := compareUTF16([]byte(sa), []byte(sb)); got != want {
					t.Errorf("compareUTF16(%q, %q) = %d, want %d", sa, sb, got, want)
				}
			}
		}
	}
}

func utf16Units(s string) []uint16 {
	var u []uint16
	for _, r := range s {
		if r >= 0x10000 {
			r -= 0x10000
			u = append(u, uint16(0xd800+(r>>10)), uint16(0xdc00+(r&0x3ff)))
		} else {
			u = append(u, uint16(r))
		}
	}
	return u
}

// RFC 8785 appendix B: for every number an encoder writes from a float64, the output
// is exactly RFC 8785's, whichever notation the encoder chose.
func TestCanonicalJSONNumbersMatchRFC8785(t *testing.T) {
	for _, c := range []struct {
		bits uint64
		want string
	}{
		{0x0000000000000000, "0"},
		{0x8000000000000000, "0"},
		{0x0000000000000001, "5e-324"},
		{0x8000000000000001, "-5e-324"},
		{0x7fefffffffffffff, "1.7976931348623157e+308"},
		{0xffefffffffffffff, "-1.7976931348623157e+308"},
		{0x4340000000000000, "9007199254740992"},
		{0xc340000000000000, "-9007199254740992"},
		{0x4430000000000000, "295147905179352830000"},
		{0x44b52d02c7e14af5, "9.999999999999997e+22"},
		{0x44b52d02c7e14af6, "1e+23"},
		{0x444b1ae4d6e2ef4e, "999999999999999700000"},
		{0x444b1ae4d6e2ef4f, "999999999999999900000"},
		{0x444b1ae4d6e2ef50, "1e+21"},
		{0x3eb0c6f7a0b5ed8c, "9.999999999999997e-7"},
		{0x3eb0c6f7a0b5ed8d, "0.000001"},
		{0x41b3de4355555553, "333333333.3333332"},
		{0x41b3de4355555554, "333333333.33333325"},
		{0x41b3de4355555555, "333333333.3333333"},
		{0x41b3de4355555556, "333333333.3333334"},
		{0x41b3de4355555557, "333333333.33333343"},
		{0xbecbf647612f3696, "-0.0000033333333333333333"},
	} {
		f := math.Float64frombits(c.bits)
		for _, spelled := range []string{
			strconv.FormatFloat(f, 'g', -1, 64),
			strconv.FormatFloat(f, 'e', -1, 64),
			strconv.FormatFloat(f, 'E', -1, 64),
			strconv.FormatFloat(f, 'f', -1, 64),
			canonjsontest.MustMarshal(t, f),
		} {
			got, err := Canonical([]byte(spelled))
			if err != nil {
				t.Errorf("%#x spelled %s: %v", c.bits, spelled, err)
				continue
			}
			if string(got) != c.want {
				t.Errorf("%#x spelled %s: got %s, want %s", c.bits, spelled, got, c.want)
			}
		}
	}
	// And for random float64 values: the output reads back as the same float64, and
	// every notation gives the same bytes.
	rng := rand.New(rand.NewSource(1))
	for range 20000 {
		f := math.Float64frombits(rng.Uint64())
		if math.IsNaN(f) || math.IsInf(f, 0) {
			continue
		}
		want, err := Canonical([]byte(strconv.FormatFloat(f, 'g', -1, 64)))
		if err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		back, err := strconv.ParseFloat(string(want), 64)
		if err != nil || back != f && !(f == 0 && back == 0) {
			t.Fatalf("%v: canonical %s reads back as %v (%v)", f, want, back, err)
		}
		for _, fmtc := range []byte{'e', 'f'} {
			got, err := Canonical([]byte(strconv.FormatFloat(f, fmtc, -1, 64)))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%v spelled with %c: %s (%v), want %s", f, fmtc, got, err, want)
			}
		}
	}
}

func TestCanonicalJSONRejects(t *testing.T) {
	deep := strings.Repeat("[", MaxDepth+1) + strings.Repeat("]", MaxDepth+1)
	okDeep := strings.Repeat(`{"a":`, MaxDepth) + "1" + strings.Repeat("}", MaxDepth)
	if _, err := Canonical([]byte(okDeep)); err != nil {
		t.Errorf("depth %d rejected: %v", MaxDepth, err)
	}
	for _, bad := range []string{
		``, ` `, `{`, `}`, `[1,]`, `[,1]`, `{"a":1,}`, `{"a" 1}`, `{a:1}`, `{"a":1 "b":2}`,
		`1 2`, `[] []`, `nul`, `tru`, `True`, `NaN`, `Infinity`, `-`, `+1`, `01`, `1.`, `.5`, `1e`, `1e+`, `0x10`,
		`"abc`, `"\x"`, `"\u12"`, `"\u12G4"`, "\"a\tb\"", "\"a\nb\"", "\"\x00\"",
		`"\ud800"`, `"\udc00"`, `"\ud800\u0041"`, `"\ud800\ud800"`, `"\udc00\ud800"`,
		"\"\xff\"", "\"\xc3\"", "\"\xed\xa0\x80\"", "\"\xc0\xaf\"", "{\"\xff\":1}",
		`{"a":1,"a":2}`, `{"a":1,"b":2,"a":3}`, `{"b":1,"a":2,"b":3}`, `{"\u0061":1,"a":2}`,
		`1e309`, `-1e309`, `1.8e308`, `1e999999999999999999999`, `1e-100000`,
		deep,
		"\ufeff{}", // a byte order mark is not JSON whitespace
	} {
		got, err := Canonical([]byte(bad))
		if err == nil {
			t.Errorf("Canonical(%q) = %s, want an error", bad, got)
			continue
		}
		if !errors.Is(err, errCanonical) {
			t.Errorf("Canonical(%q): error %v does not wrap errCanonical", bad, err)
		}
	}
}

func TestAppendCanonicalJSON(t *testing.T) {
	dst := []byte("prefix:")
	out, err := Append(dst, []byte(`{"b":1,"a":2}`))
	if err != nil || string(out) != `prefix:{"a":2,"b":1}` {
		t.Fatalf("got %q, %v", out, err)
	}
	out, err = Append(out, []byte(`{"b":1,"b":2}`))
	if err == nil || string(out) != `prefix:{"a":2,"b":1}` {
		t.Fatalf("on error got %q, %v; want the buffer unchanged", out, err)
	}
}

func TestCanonicalJSONAllocations(t *testing.T) {
	if raceDetector {
		t.Skip("allocation counts under -race: sync.Pool drops pooled buffers at random")
	}
	doc := []byte(canonjsontest.BenchArgs)
	buf := make([]byte, 0, 4096)
	n := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = Append(buf[:0], doc); err != nil {
			t.Fatal(err)
		}
	})
	if n > 0 {
		t.Errorf("AppendCanonicalJSON into a large enough buffer: %v allocations, want 0", n)
	}
	n = testing.AllocsPerRun(100, func() {
		if _, err := Canonical(doc); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 {
		t.Errorf("CanonicalJSON: %v allocations, want at most 1 (the result)", n)
	}
}

// The corpus's documents collide exactly when they mean the same JSON value.
func TestCanonicalJSONCorpus(t *testing.T) {
	type entry struct {
		src   string
		canon []byte
	}
	var ok []entry
	for _, s := range canonjsontest.Corpus {
		c, err := Canonical([]byte(s))
		if err != nil {
			continue
		}
		checkCanonical(t, []byte(s), c)
		ok = append(ok, entry{s, c})
	}
	if len(ok) < len(canonjsontest.Corpus)-5 {
		t.Fatalf("only %d of %d corpus documents were accepted", len(ok), len(canonjsontest.Corpus))
	}
	for i, a := range ok {
		for _, b := range ok[i+1:] {
			same := canonjsontest.SemanticEqual(t, []byte(a.src), []byte(b.src))
			if same != bytes.Equal(a.canon, b.canon) {
				t.Errorf("%s and %s: same value %v, but canonical forms %s and %s", a.src, b.src, same, a.canon, b.canon)
			}
		}
	}
}

// checkCanonical asserts what must hold for every accepted document src with
// canonical form c.
func checkCanonical(t *testing.T, src, c []byte) {
	t.Helper()
	if !json.Valid(src) {
		t.Fatalf("accepted invalid JSON %q", src)
	}
	if !json.Valid(c) || !utf8.Valid(c) {
		t.Fatalf("canonical form of %q is not valid JSON: %q", src, c)
	}
	again, err := Canonical(c)
	if err != nil || !bytes.Equal(again, c) {
		t.Fatalf("not idempotent: %q -> %q -> %q (%v)", src, c, again, err)
	}
	if !canonjsontest.SemanticEqual(t, src, c) {
		t.Fatalf("canonical form %q of %q means something else", c, src)
	}
	// Key order, whitespace, escapes and number spelling never change the output.
	h := fnv.New64a()
	h.Write(src)
	rng := rand.New(rand.NewSource(int64(h.Sum64())))
	for range 3 {
		v := canonjsontest.Respell(t, rng, src)
		cv, err := Canonical(v)
		if err != nil || !bytes.Equal(cv, c) {
			t.Fatalf("respelling %q as %q gives %q (%v), want %q", src, v, cv, err, c)
		}
	}
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range canonjsontest.Corpus {
		f.Add([]byte(s))
	}
	f.Add([]byte(canonjsontest.BenchArgs))
	type entry struct {
		src, canon []byte
	}
	var corpus []entry
	for _, s := range canonjsontest.Corpus {
		if c, err := Canonical([]byte(s)); err == nil {
			corpus = append(corpus, entry{[]byte(s), c})
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := Canonical(data)
		if err != nil {
			return
		}
		checkCanonical(t, data, c)
		for _, e := range corpus {
			if bytes.Equal(e.canon, c) && !canonjsontest.SemanticEqual(t, e.src, data) {
				t.Fatalf("%q and %q collide as %q", e.src, data, c)
			}
		}
	})
}

func BenchmarkCanonicalJSON(b *testing.B) {
	doc := []byte(canonjsontest.BenchArgs)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonical(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalJSONSmall(b *testing.B) {
	doc := []byte(`{"path":"README.md"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Canonical(doc); err != nil {
			b.Fatal(err)
		}
	}
}
