package runtime

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func TestStructuredResult_NilRequiredSlicesBecomeEmptyArrays(t *testing.T) {
	type item struct {
		Tags []string `json:"tags"`
	}
	type result struct {
		Entries  []item   `json:"entries"`
		Optional []string `json:"optional,omitempty"`
		Nested   item     `json:"nested"`
	}
	spec := &ToolSpec{Name: "x.y", OutputTrust: TrustTool}
	got, err := StructuredResult(spec, result{Entries: []item{{}}})
	if err != nil {
		t.Fatal(err)
	}
	want := `{"entries":[{"tags":[]}],"nested":{"tags":[]}}`
	if string(got.Structured) != want {
		t.Fatalf("Structured = %s, want %s", got.Structured, want)
	}
	if len(got.Content) != 1 || got.Content[0].Text != want || got.Content[0].Trust != TrustTool {
		t.Fatalf("Content = %+v", got.Content)
	}
}

// DecodeArgs reuses its decoders; what one call leaves behind — an error, a value's
// trailing bytes — must not reach the next.
func TestDecodeArgs_EachCallStandsAlone(t *testing.T) {
	type args struct {
		N   int    `json:"n"`
		Key string `json:"key"`
	}
	for i, c := range []struct {
		raw, err string
		want     args
	}{
		{raw: `{"n":1,"key":"a"}`, want: args{N: 1, Key: "a"}},
		{raw: `{"n":2,"other":true}`, err: `unknown field "other"`},
		{raw: `{"n":3}`, want: args{N: 3, Key: "d"}},
		{raw: `{"n":"x"}`, err: "cannot unmarshal string"},
		{raw: `{"n":4} {"n":99,"bogus":1}`, want: args{N: 4, Key: "d"}}, // the first value only
		{raw: `{"n":8}}`, want: args{N: 8, Key: "d"}},                   // a stray closing brace after the value
		{raw: `{"key":"b"}`, want: args{N: 0, Key: "b"}},
		{raw: `{"n":5`, err: "unexpected EOF"},
		{raw: ` null `, want: args{Key: "d"}},
		{raw: ``, want: args{Key: "d"}},
		{raw: `{"n":6}   `, want: args{N: 6, Key: "d"}},
		{raw: `{"n":7}`, want: args{N: 7, Key: "d"}},
	} {
		got := args{Key: "d"} // a default, as generated wrappers pre-fill
		err := DecodeArgs([]byte(c.raw), &got)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Fatalf("%d: DecodeArgs(%s) = %v, want an error with %q", i, c.raw, err, c.err)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Fatalf("%d: DecodeArgs(%s) = %+v, %v; want %+v", i, c.raw, got, err, c.want)
		}
	}
}

func TestDecodeArgs_Concurrent(t *testing.T) {
	type args struct {
		N int `json:"n"`
	}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				n := g*1000 + i
				var a args
				raw := fmt.Sprintf(`{"n":%d}`, n)
				if i%7 == 0 {
					raw = fmt.Sprintf(`{"n":%d,"x":1}`, n) // an error now and then
				}
				err := DecodeArgs([]byte(raw), &a)
				if i%7 == 0 {
					if err == nil {
						t.Errorf("%s: no error", raw)
					}
					continue
				}
				if err != nil || a.N != n {
					t.Errorf("%s: got %d, %v", raw, a.N, err)
				}
			}
		})
	}
	wg.Wait()
}

func TestWithEmptySlices_OnlyTypesThatNeedIt(t *testing.T) {
	type plain struct {
		OK   bool              `json:"ok"`
		Tags []string          `json:"tags,omitempty"`
		Meta map[string]string `json:"meta"`
	}
	type tree struct {
		Name string `json:"name"`
		Kids []tree `json:"kids,omitempty"` // recursive: the walk must end
	}
	type leafy struct {
		Kids []tree `json:"kids,omitempty"`
		Leaf struct {
			IDs []int `json:"ids"`
		} `json:"leaf"`
	}
	for _, c := range []struct {
		v    any
		want string
		need bool
	}{
		{plain{OK: true}, `{"ok":true,"meta":null}`, false},
		{tree{Name: "a", Kids: []tree{{Name: "b"}}}, `{"name":"a","kids":[{"name":"b"}]}`, false},
		{leafy{}, `{"leaf":{"ids":[]}}`, true},
	} {
		if got := mayHoldNullSlice(reflect.TypeOf(c.v)); got != c.need {
			t.Errorf("%T: mayHoldNullSlice = %v, want %v", c.v, got, c.need)
		}
		b, err := json.Marshal(withEmptySlices(c.v))
		if err != nil || string(b) != c.want {
			t.Errorf("%T: %s, %v; want %s", c.v, b, err, c.want)
		}
	}
}

// FuzzDecodeArgs decodes two documents in a row through DecodeArgs, whose decoders are
// reused, and each also through a fresh json.Decoder: the value and whether it failed
// must agree, so nothing one call leaves in a reused decoder reaches the next.
func FuzzDecodeArgs(f *testing.F) {
	for _, s := range [][2]string{
		{`{"n":1,"s":"a"}`, `{"n":2}`},
		{`{"n":1} {"x":2}`, `{"s":"b"}`},
		{`{"n":`, `{"n":3}`},
		{`{"x":1}`, `{"l":[1,2]}`},
		{`null`, ` `},
		{`[1]`, `"s"`},
	} {
		f.Add(s[0], s[1])
	}
	type args struct {
		N int      `json:"n"`
		S string   `json:"s"`
		L []int    `json:"l"`
		M *float64 `json:"m"`
	}
	fresh := func(raw string) (args, bool) {
		var a args
		if t := strings.TrimSpace(raw); t == "" || t == "null" {
			raw = "{}"
		}
		dec := json.NewDecoder(strings.NewReader(raw))
		dec.DisallowUnknownFields()
		return a, dec.Decode(&a) == nil
	}
	f.Fuzz(func(t *testing.T, first, second string) {
		for _, raw := range []string{first, second, first} {
			var got args
			err := DecodeArgs([]byte(raw), &got)
			want, ok := fresh(raw)
			if (err == nil) != ok || (ok && !reflect.DeepEqual(got, want)) {
				t.Fatalf("DecodeArgs(%q) = %+v, %v; a fresh decoder: %+v, ok %v", raw, got, err, want, ok)
			}
		}
	})
}
