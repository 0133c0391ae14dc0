package runtime

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"math"
	"math/big"
	"math/rand"
	"slices"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
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
		got, err := CanonicalJSON([]byte(c.in))
		if err != nil {
			t.Errorf("CanonicalJSON(%s): %v", c.in, err)
			continue
		}
		if string(got) != c.want {
			t.Errorf("CanonicalJSON(%s)\n got  %s\n want %s", c.in, got, c.want)
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
	got, err := CanonicalJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("got  %s\nwant %s", got, want)
	}
	// Names that are escaped in the output sort by their value, not their escape.
	got, err = CanonicalJSON([]byte(`{"\"":1,"\n":2,"!":3,"#":4,"\\":5}`))
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
	got, err = CanonicalJSON([]byte(b.String()))
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
			mustMarshal(t, f),
		} {
			got, err := CanonicalJSON([]byte(spelled))
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
		want, err := CanonicalJSON([]byte(strconv.FormatFloat(f, 'g', -1, 64)))
		if err != nil {
			t.Fatalf("%v: %v", f, err)
		}
		back, err := strconv.ParseFloat(string(want), 64)
		if err != nil || back != f && !(f == 0 && back == 0) {
			t.Fatalf("%v: canonical %s reads back as %v (%v)", f, want, back, err)
		}
		for _, fmtc := range []byte{'e', 'f'} {
			got, err := CanonicalJSON([]byte(strconv.FormatFloat(f, fmtc, -1, 64)))
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%v spelled with %c: %s (%v), want %s", f, fmtc, got, err, want)
			}
		}
	}
}

func mustMarshal(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestCanonicalJSONRejects(t *testing.T) {
	deep := strings.Repeat("[", CanonicalMaxDepth+1) + strings.Repeat("]", CanonicalMaxDepth+1)
	okDeep := strings.Repeat(`{"a":`, CanonicalMaxDepth) + "1" + strings.Repeat("}", CanonicalMaxDepth)
	if _, err := CanonicalJSON([]byte(okDeep)); err != nil {
		t.Errorf("depth %d rejected: %v", CanonicalMaxDepth, err)
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
		got, err := CanonicalJSON([]byte(bad))
		if err == nil {
			t.Errorf("CanonicalJSON(%q) = %s, want an error", bad, got)
			continue
		}
		if !errors.Is(err, errCanonical) {
			t.Errorf("CanonicalJSON(%q): error %v does not wrap errCanonical", bad, err)
		}
	}
}

func TestAppendCanonicalJSON(t *testing.T) {
	dst := []byte("prefix:")
	out, err := AppendCanonicalJSON(dst, []byte(`{"b":1,"a":2}`))
	if err != nil || string(out) != `prefix:{"a":2,"b":1}` {
		t.Fatalf("got %q, %v", out, err)
	}
	out, err = AppendCanonicalJSON(out, []byte(`{"b":1,"b":2}`))
	if err == nil || string(out) != `prefix:{"a":2,"b":1}` {
		t.Fatalf("on error got %q, %v; want the buffer unchanged", out, err)
	}
}

func TestCanonicalJSONAllocations(t *testing.T) {
	doc := []byte(benchArgs)
	buf := make([]byte, 0, 4096)
	n := testing.AllocsPerRun(100, func() {
		var err error
		if buf, err = AppendCanonicalJSON(buf[:0], doc); err != nil {
			t.Fatal(err)
		}
	})
	if n > 0 {
		t.Errorf("AppendCanonicalJSON into a large enough buffer: %v allocations, want 0", n)
	}
	n = testing.AllocsPerRun(100, func() {
		if _, err := CanonicalJSON(doc); err != nil {
			t.Fatal(err)
		}
	})
	if n > 1 {
		t.Errorf("CanonicalJSON: %v allocations, want at most 1 (the result)", n)
	}
}

// canonCorpus: documents that are pairwise different unless they are listed in the
// same group of TestCanonicalJSONCorpus. It seeds the fuzzer.
var canonCorpus = []string{
	`null`, `true`, `false`, `0`, `-0`, `1`, `-1`, `1.0`, `1e0`, `10e-1`, `2`, `0.1`, `0.10`, `1e-1`,
	`0.30000000000000001`, `0.3`, `9007199254740992`, `9007199254740993`, `9007199254740993.0`,
	`1e21`, `1000000000000000000000`, `1e400`, `1e308`, `1e-400`,
	`""`, `"a"`, `"\u0061"`, `"A"`, `"\u00e9"`, `"é"`, "\"e\u0301\"", `"\ud83d\ude00"`, `"😀"`, `"\/"`, `"/"`,
	`"1"`, `"true"`, `"null"`, `"\u0000"`, `"\n"`, `"\\n"`,
	`[]`, `{}`, `[null]`, `[[]]`, `[{}]`, `{"":null}`, `[1,2]`, `[2,1]`, `[1,[2]]`, `[[1],2]`,
	`{"a":1}`, `{"a":1.0}`, `{"a":"1"}`, `{"A":1}`, `{"a":1,"b":2}`, `{"b":2,"a":1}`, `{"a":2,"b":1}`,
	`{"a":{"b":1}}`, `{"a.b":1}`, `{"a":[1]}`, `{"ab":1}`, `{"a":1,"b":null}`,
	`{"a":1,"a":1}`, "{\"\xff\":1}", `0e010000000000000000000`, `-0.000e-99999999999999999999`, `1e-99999`,
	` { "path" : "src/main.go", "max_bytes" : 65536.0, "tags": ["x", "y"], "opts": {"z": true, "a": null} } `,
	`{"path":"src/main.go","max_bytes":65536,"tags":["x","y"],"opts":{"a":null,"z":true}}`,
	`{"path":"src/main.go","max_bytes":65536,"tags":["y","x"],"opts":{"a":null,"z":true}}`,
}

// The corpus's documents collide exactly when they mean the same JSON value.
func TestCanonicalJSONCorpus(t *testing.T) {
	type entry struct {
		src   string
		canon []byte
	}
	var ok []entry
	for _, s := range canonCorpus {
		c, err := CanonicalJSON([]byte(s))
		if err != nil {
			continue
		}
		checkCanonical(t, []byte(s), c)
		ok = append(ok, entry{s, c})
	}
	if len(ok) < len(canonCorpus)-5 {
		t.Fatalf("only %d of %d corpus documents were accepted", len(ok), len(canonCorpus))
	}
	for i, a := range ok {
		for _, b := range ok[i+1:] {
			same := semanticEqual(t, []byte(a.src), []byte(b.src))
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
	again, err := CanonicalJSON(c)
	if err != nil || !bytes.Equal(again, c) {
		t.Fatalf("not idempotent: %q -> %q -> %q (%v)", src, c, again, err)
	}
	if !semanticEqual(t, src, c) {
		t.Fatalf("canonical form %q of %q means something else", c, src)
	}
	// Key order, whitespace, escapes and number spelling never change the output.
	h := fnv.New64a()
	h.Write(src)
	rng := rand.New(rand.NewSource(int64(h.Sum64())))
	for range 3 {
		v := respell(t, rng, src)
		cv, err := CanonicalJSON(v)
		if err != nil || !bytes.Equal(cv, c) {
			t.Fatalf("respelling %q as %q gives %q (%v), want %q", src, v, cv, err, c)
		}
	}
}

func decodeExact(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", b, err)
	}
	return v
}

// semanticEqual compares two JSON documents as values: numbers as exact decimals.
func semanticEqual(t *testing.T, a, b []byte) bool {
	return valueEqual(decodeExact(t, a), decodeExact(t, b))
}

func valueEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !valueEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !valueEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case json.Number:
		y, ok := b.(json.Number)
		return ok && decimalKey(string(x)) == decimalKey(string(y))
	default:
		return a == b
	}
}

// decimalKey is the exact value of a JSON number as sign, significant digits and
// the exponent of the last digit (any size): equal keys, equal values.
func decimalKey(s string) string {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mant, exp, _ := strings.Cut(strings.ToLower(s), "e")
	e := new(big.Int)
	if exp != "" {
		e.SetString(strings.TrimPrefix(exp, "+"), 10)
	}
	intPart, frac, _ := strings.Cut(mant, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	e.Sub(e, big.NewInt(int64(len(frac))))
	for strings.HasSuffix(digits, "0") {
		digits = digits[:len(digits)-1]
		e.Add(e, big.NewInt(1))
	}
	if digits == "" {
		return "0"
	}
	sign := "+"
	if neg {
		sign = "-"
	}
	return sign + digits + "e" + e.String()
}

// respell writes the document src again with its object members shuffled, random
// whitespace, random \u escapes and each number spelled another way.
func respell(t *testing.T, rng *rand.Rand, src []byte) []byte {
	var b bytes.Buffer
	ws := func() {
		for range rng.Intn(3) {
			b.WriteByte(" \t\r\n"[rng.Intn(4)])
		}
	}
	var str func(s string)
	str = func(s string) {
		b.WriteByte('"')
		for _, r := range s {
			switch {
			case r == '"' || r == '\\' || r < 0x20 || rng.Intn(4) == 0:
				if r >= 0x10000 {
					r -= 0x10000
					fmt.Fprintf(&b, `\u%04X\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
				} else if r == '/' && rng.Intn(2) == 0 {
					b.WriteString(`\/`)
				} else {
					fmt.Fprintf(&b, `\u%04x`, r)
				}
			default:
				b.WriteRune(r)
			}
		}
		b.WriteByte('"')
	}
	var val func(v any)
	val = func(v any) {
		ws()
		switch x := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			slices.Sort(keys)
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			b.WriteByte('{')
			for i, k := range keys {
				if i > 0 {
					b.WriteByte(',')
				}
				ws()
				str(k)
				ws()
				b.WriteByte(':')
				val(x[k])
			}
			ws()
			b.WriteByte('}')
		case []any:
			b.WriteByte('[')
			for i, e := range x {
				if i > 0 {
					b.WriteByte(',')
				}
				val(e)
			}
			ws()
			b.WriteByte(']')
		case string:
			str(x)
		case json.Number:
			b.WriteString(respellNumber(rng, string(x)))
		default:
			b.WriteString(mustMarshal(t, x))
		}
		ws()
	}
	val(decodeExact(t, src))
	return b.Bytes()
}

// respellNumber writes the same decimal value differently.
func respellNumber(rng *rand.Rand, s string) string {
	mant, exp, hasExp := strings.Cut(strings.ToLower(s), "e")
	if !hasExp {
		exp = "0"
	}
	switch rng.Intn(3) {
	case 0:
		if !strings.Contains(mant, ".") {
			mant += ".0"
		} else {
			mant += "0"
		}
		return mant + "E" + exp
	case 1:
		// Multiply an integer mantissa by ten and compensate in the exponent.
		e, err := strconv.Atoi(exp)
		if err != nil || strings.Contains(mant, ".") || strings.TrimPrefix(mant, "-") == "0" {
			return s
		}
		return mant + "0e" + strconv.Itoa(e-1)
	}
	return s
}

func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range canonCorpus {
		f.Add([]byte(s))
	}
	f.Add([]byte(benchArgs))
	type entry struct {
		src, canon []byte
	}
	var corpus []entry
	for _, s := range canonCorpus {
		if c, err := CanonicalJSON([]byte(s)); err == nil {
			corpus = append(corpus, entry{[]byte(s), c})
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := CanonicalJSON(data)
		if err != nil {
			return
		}
		checkCanonical(t, data, c)
		for _, e := range corpus {
			if bytes.Equal(e.canon, c) && !semanticEqual(t, e.src, data) {
				t.Fatalf("%q and %q collide as %q", e.src, data, c)
			}
		}
	})
}

const benchArgs = `{"path": "src/internal/handlers/user_profile.go", "max_bytes": 65536, "offset": 0,
 "options": {"follow_symlinks": false, "encoding": "utf-8", "ranges": [[0, 100], [200, 300.5]]},
 "tags": ["review", "release/1.2", "caf\u00e9"], "note": "line one\nline \"two\""}`

func BenchmarkCanonicalJSON(b *testing.B) {
	doc := []byte(benchArgs)
	b.SetBytes(int64(len(doc)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CanonicalJSON(doc); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkCanonicalJSONSmall(b *testing.B) {
	doc := []byte(`{"path":"README.md"}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CanonicalJSON(doc); err != nil {
			b.Fatal(err)
		}
	}
}
