package faulttest

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/toolgen/toolgen/runtime/internal/faultstore"
)

// TestMain writes the tables to FAULTTEST_OUT (Markdown) after the tests ran.
func TestMain(m *testing.M) {
	code := m.Run()
	if out := os.Getenv("FAULTTEST_OUT"); out != "" {
		if err := os.WriteFile(out, []byte(report.markdown()), 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "faulttest: write FAULTTEST_OUT:", err)
			if code == 0 {
				code = 1
			}
		}
	}
	os.Exit(code)
}

// rateRun is one store's rate run.
type rateRun struct {
	Store    string
	Calls    int
	Rate     float64
	Seed     uint64
	Results  []caseResult
	Injected map[faultstore.Fault]int
	Elapsed  time.Duration
}

type collector struct {
	mu     sync.Mutex
	matrix map[string][]caseResult
	bursts map[string][]caseResult
	rate   []rateRun
}

var report = &collector{matrix: map[string][]caseResult{}, bursts: map[string][]caseResult{}}

func (c *collector) addMatrix(store string, rs []caseResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.matrix[store] = append(c.matrix[store], rs...)
}

func (c *collector) addBursts(store string, rs []caseResult) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.bursts[store] = append(c.bursts[store], rs...)
}

func (c *collector) addRate(r rateRun) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.rate = append(c.rate, r)
}

func (c *collector) markdown() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	b.WriteString("# Store fault injection (runtime/faulttest)\n\n")
	b.WriteString("Legend: S = SUCCEEDED, U = UNCERTAIN, F = FAILED (crash_loop). *Repeats* are extra effects of\n" +
		"classes that are safe to repeat (allowed); *double* counts calls of a class that may run at most once\n" +
		"whose effect ran twice or more (must be 0). *U w/o effect*: UNCERTAIN although the effect was never sent\n" +
		"(allowed: the watermark was committed and the pipeline could not know).\n\n")
	stores := sortedKeys(c.matrix)
	for _, s := range stores {
		b.WriteString(matrixSummary(s, c.matrix[s]))
		b.WriteString("\n")
	}
	sort.Slice(c.rate, func(i, j int) bool { return c.rate[i].Store < c.rate[j].Store })
	for _, r := range c.rate {
		b.WriteString(rateTable(r))
		b.WriteString("\n")
	}
	for _, s := range sortedKeys(c.bursts) {
		b.WriteString(matrixTable(s+", three faults in a row", c.bursts[s]))
		b.WriteString("\n")
	}
	for _, s := range stores {
		b.WriteString(matrixTable(s, c.matrix[s]))
		b.WriteString("\n")
	}
	return b.String()
}

func sortedKeys(m map[string][]caseResult) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

func pointRank(p faultstore.Point) int {
	for i, mp := range matrixPoints {
		if mp.Point == p {
			return i
		}
	}
	return len(matrixPoints)
}

func classRank(name string) int {
	for i, c := range classes {
		if c.Name == name {
			return i
		}
	}
	return len(classes)
}

// tally sums a group of cases.
type tally struct {
	cases, injected, effects, repeats, doubles, falseU, failed, recovers int
	finals                                                               map[string]int
	firsts                                                               map[string]int
	paths                                                                map[path]bool
}

func (t *tally) add(r caseResult) {
	if t.finals == nil {
		t.finals, t.firsts, t.paths = map[string]int{}, map[string]int{}, map[path]bool{}
	}
	t.firsts[strings.TrimSuffix(r.First, "/")]++
	t.cases++
	t.recovers += r.Recovers
	t.injected += r.Injected
	t.effects += r.Effects
	if r.Effects > 1 {
		if r.Class.RetrySafe() {
			t.repeats += r.Effects - 1
		} else {
			t.doubles++
		}
	}
	if r.FalseUncertain {
		t.falseU++
	}
	if len(r.Problems) > 0 {
		t.failed++
	}
	t.finals[r.FinalStatus]++
	t.paths[r.Path] = true
}

func (t *tally) finalStates() string {
	var parts []string
	for _, s := range []struct{ status, abbr string }{{"SUCCEEDED", "S"}, {"UNCERTAIN", "U"}, {"FAILED", "F"}} {
		if n := t.finals[s.status]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", s.abbr, n))
		}
	}
	for st, n := range t.finals {
		if st != "SUCCEEDED" && st != "UNCERTAIN" && st != "FAILED" {
			parts = append(parts, fmt.Sprintf("%s %d", st, n))
		}
	}
	return strings.Join(parts, ", ")
}

// firstOutcomes lists what the caller's first Execute returned (after the approval
// of a held call), most frequent first.
func (t *tally) firstOutcomes() string {
	type kv struct {
		k string
		n int
	}
	var kvs []kv
	for k, n := range t.firsts {
		kvs = append(kvs, kv{k, n})
	}
	sort.Slice(kvs, func(i, j int) bool {
		if kvs[i].n != kvs[j].n {
			return kvs[i].n > kvs[j].n
		}
		return kvs[i].k < kvs[j].k
	})
	var parts []string
	for _, e := range kvs {
		parts = append(parts, fmt.Sprintf("%s %d", e.k, e.n))
	}
	return strings.Join(parts, ", ")
}

func (t *tally) pass() string {
	return fmt.Sprintf("%d/%d", t.cases-t.failed, t.cases)
}

func (t *tally) pathList() string {
	var ps []string
	for p := range t.paths {
		ps = append(ps, string(p))
	}
	sort.Strings(ps)
	return strings.Join(ps, ", ")
}

// matrixTable is the full matrix of one store: point × fault type × class.
func matrixTable(store string, rs []caseResult) string {
	type key struct {
		p faultstore.Point
		k faultstore.Kind
		c string
	}
	groups := map[key]*tally{}
	var order []key
	for _, r := range rs {
		k := key{r.Point, r.Kind, r.Class.Name}
		if groups[k] == nil {
			groups[k] = &tally{}
			order = append(order, k)
		}
		groups[k].add(r)
	}
	sort.SliceStable(order, func(i, j int) bool {
		a, b := order[i], order[j]
		if a.p != b.p {
			return pointRank(a.p) < pointRank(b.p)
		}
		if a.k != b.k {
			return a.k < b.k
		}
		return classRank(a.c) < classRank(b.c)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "### Fault matrix, %s: point × fault type × class\n\n", store)
	b.WriteString("| point | fault | class | paths | cases | faults | first outcome | effects | repeats | double | final states | U w/o effect | pass |\n")
	b.WriteString("| --- | --- | --- | --- | --: | --: | --- | --: | --: | --: | --- | --: | --: |\n")
	for _, k := range order {
		t := groups[k]
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %d | %d | %s | %d | %d | %d | %s | %d | %s |\n",
			k.p, k.k, k.c, t.pathList(), t.cases, t.injected, t.firstOutcomes(), t.effects, t.repeats, t.doubles, t.finalStates(), t.falseU, t.pass())
	}
	return b.String()
}

// matrixSummary is one store's matrix by point × fault type.
func matrixSummary(store string, rs []caseResult) string {
	type key struct {
		p faultstore.Point
		k faultstore.Kind
	}
	groups := map[key]*tally{}
	var order []key
	total := &tally{}
	for _, r := range rs {
		k := key{r.Point, r.Kind}
		if groups[k] == nil {
			groups[k] = &tally{}
			order = append(order, k)
		}
		groups[k].add(r)
		total.add(r)
	}
	sort.SliceStable(order, func(i, j int) bool {
		if order[i].p != order[j].p {
			return pointRank(order[i].p) < pointRank(order[j].p)
		}
		return order[i].k < order[j].k
	})
	var b strings.Builder
	fmt.Fprintf(&b, "### Fault matrix summary, %s: point × fault type (all classes)\n\n", store)
	b.WriteString("| point | fault | cases | faults | effects | repeats | double | final states | U w/o effect | pass |\n")
	b.WriteString("| --- | --- | --: | --: | --: | --: | --: | --- | --: | --: |\n")
	for _, k := range order {
		t := groups[k]
		fmt.Fprintf(&b, "| %s | %s | %d | %d | %d | %d | %d | %s | %d | %s |\n",
			k.p, k.k, t.cases, t.injected, t.effects, t.repeats, t.doubles, t.finalStates(), t.falseU, t.pass())
	}
	fmt.Fprintf(&b, "| **all** | | %d | %d | %d | %d | %d | %s | %d | %s |\n",
		total.cases, total.injected, total.effects, total.repeats, total.doubles, total.finalStates(), total.falseU, total.pass())
	return b.String()
}

// rateTable is one store's rate run: by class, then the faults injected.
func rateTable(r rateRun) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### Rate run, %s: %d calls, %.1f %% per write, seed %d, %s\n\n",
		r.Store, r.Calls, r.Rate*100, r.Seed, r.Elapsed.Round(100*time.Millisecond))
	b.WriteString("| class | calls | faults | recovery passes | effects | repeats | double | final states | U w/o effect | pass |\n")
	b.WriteString("| --- | --: | --: | --: | --: | --: | --: | --- | --: | --: |\n")
	total := &tally{}
	for _, c := range classes {
		t := &tally{}
		for _, res := range r.Results {
			if res.Class == c {
				t.add(res)
				total.add(res)
			}
		}
		if t.cases == 0 {
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %s | %d | %s |\n",
			c.Name, t.cases, t.injected, t.recovers, t.effects, t.repeats, t.doubles, t.finalStates(), t.falseU, t.pass())
	}
	fmt.Fprintf(&b, "| **all** | %d | %d | %d | %d | %d | %d | %s | %d | %s |\n\n",
		total.cases, total.injected, total.recovers, total.effects, total.repeats, total.doubles, total.finalStates(), total.falseU, total.pass())
	b.WriteString("| point |")
	for _, k := range faultstore.Kinds {
		fmt.Fprintf(&b, " %s |", k)
	}
	b.WriteString("\n| --- |")
	for range faultstore.Kinds {
		b.WriteString(" --: |")
	}
	b.WriteString("\n")
	for _, p := range ratePoints {
		fmt.Fprintf(&b, "| %s |", p)
		for _, k := range faultstore.Kinds {
			fmt.Fprintf(&b, " %d |", r.Injected[faultstore.Fault{Point: p, Kind: k}])
		}
		b.WriteString("\n")
	}
	return b.String()
}
