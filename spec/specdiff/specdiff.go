package specdiff

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/toolgen/toolgen/spec"
	"github.com/toolgen/toolgen/spec/diag"
	"github.com/toolgen/toolgen/vocab"
)

// Severity is a finding's severity: weakens, breaking or info (diag's).
type Severity = diag.Severity

const (
	Weakens  = diag.Weakens  // the platform will do more without a person
	Breaking = diag.Breaking // callers (or recorded results) no longer fit
	Info     = diag.Info     // anything else that changed the catalog or a spec
)

// Location is a position in a spec file: the path as the tree's Root displays it, and
// a 1-based line and column. The zero Location means "none".
type Location = diag.Location

// Finding is one reported change, in the one annotation model of package diag: Rule
// is a name of [Rules], Severity its severity, Kind and Subject what changed, Current
// and Previous where, Path and Pos the primary location (Current, else Previous), and
// Acknowledged set when the current spec of the tool the finding is about
// acknowledges its rule in this change: it is still reported, but it is signed off and
// must not fail a check.
type Finding = diag.Annotation

// Compare reports every change from prev to cur, sorted by primary location (file,
// line, column), then rule and message. Either tree may be nil (an empty tree).
func Compare(prev, cur *spec.Tree) []Finding {
	if prev == nil {
		prev = &spec.Tree{}
	}
	if cur == nil {
		cur = &spec.Tree{}
	}
	d := &differ{prev: prev, cur: cur}
	d.tools()
	d.servers()
	d.devices()
	d.protocols()
	d.policy()
	d.issuers()
	d.notifications()
	d.acknowledge()
	out := d.out
	slices.SortFunc(out, func(a, b Finding) int {
		la, lb := a.At(), b.At()
		return cmp.Or(
			cmp.Compare(la.File, lb.File),
			cmp.Compare(la.Line, lb.Line),
			cmp.Compare(la.Col, lb.Col),
			cmp.Compare(a.Rule, b.Rule),
			cmp.Compare(a.Message, b.Message),
		)
	})
	return slices.CompactFunc(out, func(a, b Finding) bool {
		return a.Rule == b.Rule && a.Message == b.Message && a.Subject == b.Subject && a.At() == b.At()
	})
}

type differ struct {
	prev, cur *spec.Tree
	out       []Finding
}

// loc is the location of p in file rel of tree t, displayed as the tree displays it.
func loc(t *spec.Tree, rel string, p spec.Pos) *Location {
	if p.Line <= 0 {
		p = spec.Pos{Line: 1, Col: 1}
	}
	if p.Col <= 0 {
		p.Col = 1
	}
	return &Location{File: displayPath(t, rel), Line: p.Line, Col: p.Col}
}

// positioned is what the spec model locates: a document, a mode, a policy rule.
type positioned interface {
	At(path string) spec.Pos
	KeyAt(path string) spec.Pos
	Has(path string) bool
}

// containers are the keys whose value is a list or a mapping: they are located at the
// key ("transport:"), where a scalar is located at its value ("risk: low" at low).
var containers = map[string]bool{
	"required_scopes": true, "args": true, "result": true, "transport": true, "transport.stdio": true,
	"transport.http": true, "classification": true, "classification.required_scopes": true, "modes": true,
	"tools": true, "exclusive_tools": true, "rules": true, "egress": true, "egress.allow": true,
	"console": true, "webhooks": true,
}

// at is the position of the first of paths that x holds, or of x itself. A key that is
// absent from one tree is located at its fallback there (for a tool, its name).
func at(x positioned, paths ...string) spec.Pos {
	for _, p := range paths {
		if x.Has(p) {
			if containers[p] {
				return x.KeyAt(p)
			}
			return x.At(p)
		}
	}
	return x.At("")
}

func (d *differ) add(rule, kind, subject string, cur, prev *Location, format string, a ...any) {
	r, _ := LookupRule(rule) // every name is in the table: TestRulesUsedAreInTable
	f := Finding{Rule: rule, Severity: r.Severity, Kind: kind, Subject: subject,
		Message: fmt.Sprintf(format, a...), Current: cur, Previous: prev}
	at := cur
	if at == nil {
		at = prev
	}
	if at != nil {
		f.Path, f.Pos = at.File, diag.Pos{Line: at.Line, Col: at.Col}
	}
	d.out = append(d.out, f)
}

// restriction orders the values of one classification field, from vocab: a higher
// number restricts more. Idempotency, side effect and risk rank that way already;
// trust ranks by how much a result is believed, so the more trusted, the less
// restrictive.
type restriction struct {
	known func(string) bool
	rank  func(string) int
}

func restrictionOf[T interface {
	~string
	Rank() int
}](parse func(string) (T, error), sign int) restriction {
	return restriction{
		known: func(s string) bool { _, err := parse(s); return err == nil },
		rank:  func(s string) int { return sign * T(s).Rank() },
	}
}

var (
	idempotencyRank = restrictionOf(vocab.ParseIdempotency, 1)
	sideEffectRank  = restrictionOf(vocab.ParseSideEffect, 1)
	riskRank        = restrictionOf(vocab.ParseRisk, 1)
	trustRank       = restrictionOf(vocab.ParseTrust, -1)
)

// lowered reports whether a field moved from one known value to another, less
// restrictive one. An unknown value on either side compares as nothing: check reports it.
func lowered(r restriction, from, to string) bool {
	return r.known(from) && r.known(to) && r.rank(to) < r.rank(from)
}

// exprText is an expression's text for comparison: white space runs collapsed, so a
// reformatted scalar compares equal.
func exprText(e *spec.Expr) string {
	if e == nil {
		return ""
	}
	return strings.Join(strings.Fields(e.Source), " ")
}

func refNames(rs []spec.Ref) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Name
	}
	return out
}

func (d *differ) tools() {
	for _, p := range d.prev.Tools {
		c := d.cur.Tool(p.Name)
		if c == nil {
			d.add("TOOL_REMOVED", "tool", p.Name, nil, loc(d.prev, p.File, p.At("name")),
				"tool %s removed; callers and pinned catalogs that name it break", p.Name)
			continue
		}
		d.tool(p, c)
	}
	for _, c := range d.cur.Tools {
		if d.prev.Tool(c.Name) == nil {
			d.add("TOOL_ADDED", "tool", c.Name, loc(d.cur, c.File, c.At("name")), nil,
				"tool %s added (side_effect %s, risk %s)", c.Name, c.SideEffect, c.Risk)
		}
	}
}

// classFields are what tools, servers and devices are classified by: the fields
// classification compares.
type classFields struct {
	sideEffect, idempotency, risk string
	scopes                        []spec.Ref
}

func toolClass(t *spec.Tool) classFields {
	return classFields{t.SideEffect, t.Idempotency, t.Risk, t.RequiredScopes}
}

// classification compares the fields tools and servers share. cl and pl locate one of
// them (idempotency, side_effect, risk, required_scopes) in the current and previous
// tree, scopeLoc a removed scope in the previous one.
func (d *differ) classification(kind, subject string, cl, pl func(key string) *Location, p, c classFields, scopeLoc func(spec.Ref) *Location) {
	if lowered(idempotencyRank, p.idempotency, c.idempotency) {
		d.add("IDEMPOTENCY_LOOSENED", kind, subject, cl("idempotency"), pl("idempotency"),
			"idempotency loosened from %s to %s: retries after an unknown outcome now run the effect again without asking", p.idempotency, c.idempotency)
	}
	if lowered(sideEffectRank, p.sideEffect, c.sideEffect) {
		d.add("SIDE_EFFECT_LOWERED", kind, subject, cl("side_effect"), pl("side_effect"),
			"side_effect lowered from %s to %s", p.sideEffect, c.sideEffect)
	}
	if lowered(riskRank, p.risk, c.risk) {
		d.add("RISK_LOWERED", kind, subject, cl("risk"), pl("risk"),
			"risk lowered from %s to %s: fewer calls need approval", p.risk, c.risk)
	}
	have := map[string]bool{}
	for _, s := range c.scopes {
		have[s.Name] = true
	}
	for _, s := range p.scopes {
		if !have[s.Name] {
			d.add("SCOPE_REMOVED", kind, subject, cl("required_scopes"), scopeLoc(s),
				"required scope %s removed: principals without it may now call", s.Name)
		}
	}
}

func (d *differ) tool(p, c *spec.Tool) {
	name := c.Name
	cl := func(key string) *Location { return loc(d.cur, c.File, at(c, key, "name")) }
	pl := func(key string) *Location { return loc(d.prev, p.File, at(p, key, "name")) }
	d.classification("tool", name, cl, pl, toolClass(p), toolClass(c), func(r spec.Ref) *Location { return loc(d.prev, p.File, r.Pos) })
	if pw, cw := exprText(p.IdempotentWhen), exprText(c.IdempotentWhen); pw != "" && cw != "" && pw != cw {
		d.add("IDEMPOTENT_WHEN_CHANGED", "tool", name, cl("idempotent_when"), pl("idempotent_when"),
			"idempotent_when changed from %q to %q: review when a retry is safe", pw, cw)
	}
	if lowered(trustRank, p.OutputTrust, c.OutputTrust) {
		d.add("OUTPUT_TRUST_RAISED", "tool", name, cl("output_trust"), pl("output_trust"),
			"output_trust raised from %s to %s: its results are believed more", p.OutputTrust, c.OutputTrust)
	}
	pa, ca := exprText(p.ApprovalWhen), exprText(c.ApprovalWhen)
	switch {
	case pa != "" && ca == "":
		d.add("APPROVAL_WHEN_REMOVED", "tool", name, cl("approval_when"), pl("approval_when"),
			"approval_when %q removed: those calls no longer wait for a person", pa)
	case pa != "" && pa != ca:
		d.add("APPROVAL_WHEN_CHANGED", "tool", name, cl("approval_when"), pl("approval_when"),
			"approval_when changed from %q to %q: review whether it still asks when it must", pa, ca)
	}
	if !p.ParallelSafe && c.ParallelSafe {
		d.add("PARALLEL_SAFE_ENABLED", "tool", name, cl("parallel_safe"), pl("parallel_safe"),
			"parallel_safe turned on: the tool may now share a parallel batch")
	}
	if p.ConfersApproval && !c.ConfersApproval {
		d.add("CONFERS_APPROVAL_DISABLED", "tool", name, cl("confers_approval"), pl("confers_approval"),
			"confers_approval turned off: the tool leaves every protocol's exclusive set unless declared there (WF-2)")
	}

	// Compatibility of the argument schema.
	d.fields(name, p, c, "args", p.Args, c.Args, cl("args"), pl("args"))
	d.toolVersion(p, c, cl, pl)
	d.toolChanged(p, c, cl, pl)
}

// toolVersion is VERSION_NOT_BUMPED: a behaviour-affecting field changed and the
// version did not grow.
func (d *differ) toolVersion(p, c *spec.Tool, cl, pl func(key string) *Location) {
	var changed []string
	if fieldsSig(p.Args, false) != fieldsSig(c.Args, false) {
		changed = append(changed, "args")
	}
	if fieldsSig(p.Result, false) != fieldsSig(c.Result, false) {
		changed = append(changed, "result")
	}
	for _, b := range []struct {
		key  string
		a, b any
	}{
		{"kind", p.Kind, c.Kind},
		{"side_effect", p.SideEffect, c.SideEffect},
		{"idempotency", p.Idempotency, c.Idempotency},
		{"idempotent_when", exprText(p.IdempotentWhen), exprText(c.IdempotentWhen)},
		{"suspends", p.Suspends, c.Suspends},
		{"output.max_bytes", p.OutputMaxBytes, c.OutputMaxBytes},
	} {
		if b.a != b.b {
			changed = append(changed, b.key)
		}
	}
	if len(changed) > 0 && c.Version <= p.Version {
		d.add("VERSION_NOT_BUMPED", "tool", c.Name, cl("version"), pl("version"),
			"%s changed but version stayed %d (was %d): the idempotency key includes the version, so bump it",
			strings.Join(changed, ", "), c.Version, p.Version)
	}
}

// toolChanged is TOOL_CHANGED: the rest of the catalog entry, what no other rule
// reported.
func (d *differ) toolChanged(p, c *spec.Tool, cl, pl func(key string) *Location) {
	name := c.Name
	pa, ca := exprText(p.ApprovalWhen), exprText(c.ApprovalWhen)
	type change struct{ label, key string }
	var other []change
	for _, o := range []struct {
		label, key string
		a, b       any
	}{
		{"description", "description", p.Description, c.Description},
		{"version", "version", p.Version, c.Version},
		{"kind", "kind", p.Kind, c.Kind},
		{"timeout", "timeout", p.Timeout, c.Timeout},
		{"suspends", "suspends", p.Suspends, c.Suspends},
		{"output.max_bytes", "output.max_bytes", p.OutputMaxBytes, c.OutputMaxBytes},
		{"result", "result", fieldsSig(p.Result, true), fieldsSig(c.Result, true)},
	} {
		if o.a != o.b {
			other = append(other, change{o.label, o.key})
		}
	}
	if pa == "" && ca != "" {
		other = append(other, change{"approval_when added", "approval_when"})
	}
	if !sameSet(refNames(p.RequiredScopes), refNames(c.RequiredScopes)) && !scopesRemoved(p.RequiredScopes, c.RequiredScopes) {
		other = append(other, change{"required_scopes added", "required_scopes"})
	}
	if lowered(idempotencyRank, c.Idempotency, p.Idempotency) || lowered(sideEffectRank, c.SideEffect, p.SideEffect) ||
		lowered(riskRank, c.Risk, p.Risk) || lowered(trustRank, c.OutputTrust, p.OutputTrust) ||
		p.ParallelSafe && !c.ParallelSafe || !p.ConfersApproval && c.ConfersApproval {
		other = append(other, change{"classification tightened", "name"})
	}
	if p.IdempotentWhen == nil && c.IdempotentWhen != nil {
		other = append(other, change{"idempotent_when added", "idempotent_when"})
	}
	if fieldsSig(p.Args, true) != fieldsSig(c.Args, true) && !d.hasArgFinding(name) {
		other = append(other, change{"args", "args"})
	}
	if len(other) > 0 {
		key := "name"
		if len(other) == 1 {
			key = other[0].key
		}
		labels := make([]string, len(other))
		for i, o := range other {
			labels[i] = o.label
		}
		slices.Sort(labels)
		d.add("TOOL_CHANGED", "tool", name, cl(key), pl(key), "catalog entry changed: %s", strings.Join(labels, ", "))
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

func scopesRemoved(prev, cur []spec.Ref) bool {
	have := map[string]bool{}
	for _, s := range cur {
		have[s.Name] = true
	}
	for _, s := range prev {
		if !have[s.Name] {
			return true
		}
	}
	return false
}

// hasArgFinding reports whether an argument rule already explains a change of tool's args.
func (d *differ) hasArgFinding(tool string) bool {
	for _, f := range d.out {
		if f.Kind == "tool" && f.Subject == tool && (strings.HasPrefix(f.Rule, "ARG_") || f.Rule == "ENUM_VALUE_REMOVED") {
			return true
		}
	}
	return false
}

// fields compares the argument fields pf (previous) and cf (current) under prefix.
// curParent and prevParent locate what holds them (args, or an object argument).
func (d *differ) fields(tool string, p, c *spec.Tool, prefix string, pf, cf []*spec.Field, curParent, prevParent *Location) {
	byName := map[string]*spec.Field{}
	for _, f := range pf {
		byName[f.Name] = f
	}
	have := map[string]bool{}
	for _, f := range cf {
		have[f.Name] = true
		d.field(tool, p, c, prefix+"."+f.Name, byName[f.Name], f, prevParent)
	}
	for _, f := range pf {
		if !have[f.Name] {
			d.add("ARG_REMOVED", "tool", tool, curParent, loc(d.prev, p.File, f.Pos),
				"argument %s removed: callers that send it are rejected", strings.TrimPrefix(prefix+"."+f.Name, "args."))
		}
	}
}

func (d *differ) field(tool string, p, c *spec.Tool, name string, pf, cf *spec.Field, prevParent *Location) {
	shown := strings.TrimPrefix(name, "args.")
	cl := func(key string) *Location { return loc(d.cur, c.File, cf.At(key)) }
	if pf == nil {
		if cf.Required && cf.Bound == "" { // a bound argument is filled by the platform
			d.add("ARG_NEWLY_REQUIRED", "tool", tool, loc(d.cur, c.File, cf.Pos), prevParent,
				"new argument %s is required: existing callers do not send it", shown)
		}
		return
	}
	pl := func(key string) *Location { return loc(d.prev, p.File, pf.At(key)) }
	switch {
	case pf.Bound != "" && cf.Bound == "":
		d.add("BOUND_REMOVED", "tool", tool, loc(d.cur, c.File, cf.Pos), pl("bound"),
			"argument %s is no longer bound to %s: the caller (the model) now supplies it", shown, pf.Bound)
	case pf.Bound != "" && cf.Bound != pf.Bound:
		d.add("BOUND_REMOVED", "tool", tool, cl("bound"), pl("bound"),
			"argument %s is bound to %s instead of %s", shown, cf.Bound, pf.Bound)
	case pf.Bound == "" && cf.Bound != "":
		d.add("ARG_BOUND", "tool", tool, cl("bound"), loc(d.prev, p.File, pf.Pos),
			"argument %s is now bound to %s: callers that send it are refused", shown, cf.Bound)
	}
	if pf.WorkspacePath && !cf.WorkspacePath {
		d.add("WORKSPACE_PATH_REMOVED", "tool", tool, loc(d.cur, c.File, cf.Pos), pl("workspace_path"),
			"argument %s is no longer a workspace path: conditions and the policy see the path as written, while the tool may follow symlinks they did not see", shown)
	}
	if pf.Type != cf.Type {
		d.add("ARG_TYPE_CHANGED", "tool", tool, cl("type"), pl("type"),
			"argument %s changed type from %s to %s", shown, pf.Type, cf.Type)
		return
	}
	if cf.Required && !pf.Required && cf.Bound == "" {
		d.add("ARG_NEWLY_REQUIRED", "tool", tool, loc(d.cur, c.File, cf.Pos), loc(d.prev, p.File, pf.Pos),
			"argument %s was optional and is now required", shown)
	}
	if len(cf.Enum) > 0 {
		for i, v := range pf.Enum {
			if !slices.ContainsFunc(cf.Enum, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(v) }) {
				prevAt := pl("enum")
				if i < len(pf.EnumPos) {
					prevAt = loc(d.prev, p.File, pf.EnumPos[i])
				}
				d.add("ENUM_VALUE_REMOVED", "tool", tool, cl("enum"), prevAt,
					"argument %s no longer accepts %v", shown, v)
			}
		}
	}
	if pf.Items != nil && cf.Items != nil {
		d.field(tool, p, c, name+"[]", pf.Items, cf.Items, prevParent)
	}
	if cf.Type == spec.TypeObject {
		d.fields(tool, p, c, name, pf.Properties, cf.Properties, loc(d.cur, c.File, cf.Pos), loc(d.prev, p.File, pf.Pos))
	}
}

// fieldsSig is a canonical text of a field list's meaning, without positions, and
// without descriptions unless desc (a description changes the catalog, not behaviour).
func fieldsSig(fs []*spec.Field, desc bool) string {
	var b strings.Builder
	for _, f := range sortedFields(fs) {
		writeSig(&b, f, desc)
	}
	return b.String()
}

// sortedFields orders fields by name: declaration order is key order, a reformatting.
func sortedFields(fs []*spec.Field) []*spec.Field {
	out := slices.Clone(fs)
	slices.SortFunc(out, func(a, b *spec.Field) int { return strings.Compare(a.Name, b.Name) })
	return out
}

func writeSig(b *strings.Builder, f *spec.Field, desc bool) {
	d := ""
	if desc {
		d = f.Description
	}
	fmt.Fprintf(b, "{%q %s %q req=%v enum=%#v def=%v/%#v", f.Name, f.Type, d, f.Required, f.Enum, f.HasDefault, f.Default)
	for _, p := range []*float64{f.Min, f.Max} {
		if p != nil {
			fmt.Fprintf(b, " %v", *p)
		} else {
			b.WriteString(" -")
		}
	}
	for _, p := range []*int64{f.MinLength, f.MaxLength, f.MinItems, f.MaxItems} {
		if p != nil {
			fmt.Fprintf(b, " %d", *p)
		} else {
			b.WriteString(" -")
		}
	}
	fmt.Fprintf(b, " %q wspath=%v", f.Pattern, f.WorkspacePath)
	if f.Items != nil {
		b.WriteString(" items=")
		writeSig(b, f.Items, desc)
	}
	for _, p := range sortedFields(f.Properties) {
		writeSig(b, p, desc)
	}
	b.WriteString("}")
}

func (d *differ) servers() {
	for _, p := range d.prev.Servers {
		c := d.cur.Server(p.ServerID)
		if c == nil {
			d.add("SERVER_REMOVED", "server", p.ServerID, nil, loc(d.prev, p.File, p.At("server_id")),
				"server %s removed", p.ServerID)
			continue
		}
		d.server(p, c)
	}
	for _, c := range d.cur.Servers {
		if d.prev.Server(c.ServerID) == nil {
			d.add("SERVER_ADDED", "server", c.ServerID, loc(d.cur, c.File, c.At("server_id")), nil,
				"server %s added (configured_by %s)", c.ServerID, c.ConfiguredBy)
		}
	}
}

func (d *differ) server(p, c *spec.Server) {
	id := c.ServerID
	cl := func(key string) *Location { return loc(d.cur, c.File, at(c, key, "server_id")) }
	pl := func(key string) *Location { return loc(d.prev, p.File, at(p, key, "server_id")) }
	// A classification field is located at its own key, or where the classification
	// is when the file leaves it out.
	ccl := func(key string) *Location { return cl2(d.cur, c, key) }
	pcl := func(key string) *Location { return cl2(d.prev, p, key) }
	if p.ConfiguredBy == "operator" && c.ConfiguredBy == "tenant" {
		d.add("SERVER_TO_TENANT", "server", id, cl("configured_by"), pl("configured_by"),
			"configured_by moved from operator to tenant: a tenant now decides what this server is")
	}
	if p.Stdio == nil && c.Stdio != nil {
		d.add("SERVER_TO_STDIO", "server", id, cl("transport"), pl("transport"),
			"transport moved to stdio: the server now runs as a local subprocess")
	}
	d.classified("server", id, p, c, ccl, pcl)

	// SERVER_CHANGED is located at the first changed key.
	var other, keys []string
	switch {
	case p.Stdio == nil && c.Stdio != nil:
		// SERVER_TO_STDIO says it.
	case p.HTTP != nil && c.HTTP != nil && p.HTTP.URL != c.HTTP.URL:
		other, keys = append(other, "transport url"), append(keys, "transport.http.url")
	case (p.HTTP == nil) != (c.HTTP == nil):
		other, keys = append(other, "transport"), append(keys, "transport")
	case p.Stdio != nil && c.Stdio != nil && (p.Stdio.Command != c.Stdio.Command ||
		!slices.Equal(p.Stdio.Args, c.Stdio.Args) || fmt.Sprint(p.Stdio.Env) != fmt.Sprint(c.Stdio.Env)):
		other, keys = append(other, "transport"), append(keys, "transport.stdio")
	}
	if p.ConfiguredBy != c.ConfiguredBy && !(p.ConfiguredBy == "operator" && c.ConfiguredBy == "tenant") {
		other, keys = append(other, "configured_by "+p.ConfiguredBy+" -> "+c.ConfiguredBy), append(keys, "configured_by")
	}
	if p.Tenant != c.Tenant && p.ConfiguredBy == c.ConfiguredBy {
		other, keys = append(other, "tenant "+p.Tenant+" -> "+c.Tenant), append(keys, "tenant")
	}
	if p.Resources != c.Resources {
		other, keys = append(other, "resources "+p.Resources+" -> "+c.Resources), append(keys, "resources")
	}
	if p.Prompts != c.Prompts {
		other, keys = append(other, "prompts "+p.Prompts+" -> "+c.Prompts), append(keys, "prompts")
	}
	if len(other) > 0 {
		d.add("SERVER_CHANGED", "server", id, cl(keys[0]), pl(keys[0]), "server changed: %s", strings.Join(other, ", "))
	}
}

// classified compares the classification of two servers (or two devices, whose
// classification is carried as a spec.Server); ccl and pcl locate a classification field.
func (d *differ) classified(kind, id string, p, c *spec.Server, ccl, pcl func(key string) *Location) {
	// A classification field newly left out falls back to its most restrictive value.
	newlyDefaulted := map[string]bool{}
	for _, f := range c.Defaulted {
		if !slices.Contains(p.Defaulted, f) {
			newlyDefaulted[f] = true
			d.add("SERVER_CLASSIFICATION_DEFAULTED", kind, id, ccl(f), pcl(f),
				"classification %s removed: it falls back to the most restrictive value", f)
		}
	}
	pick := func(field, pv, cv string) (string, string) {
		if newlyDefaulted[field] {
			return pv, pv
		}
		return pv, cv
	}
	ps, cs := pick("side_effect", p.SideEffect, c.SideEffect)
	pi, ci := pick("idempotency", p.Idempotency, c.Idempotency)
	pr, cr := pick("risk", p.Risk, c.Risk)
	cScopes := c.RequiredScopes
	if newlyDefaulted["required_scopes"] {
		cScopes = p.RequiredScopes
	}
	d.classification(kind, id, ccl, pcl, classFields{ps, pi, pr, p.RequiredScopes}, classFields{cs, ci, cr, cScopes},
		func(r spec.Ref) *Location {
			if r.Pos.Line == 0 { // the unclassified scope of a defaulted required_scopes
				return pcl("required_scopes")
			}
			return loc(d.prev, p.File, r.Pos)
		})

}

func (d *differ) devices() {
	for _, p := range d.prev.Devices {
		c := d.cur.Device(p.DeviceID)
		if c == nil {
			d.add("DEVICE_REMOVED", "device", p.DeviceID, nil, loc(d.prev, p.File, p.At("device_id")),
				"device %s removed: its token no longer connects", p.DeviceID)
			continue
		}
		d.device(p, c)
	}
	for _, c := range d.cur.Devices {
		if d.prev.Device(c.DeviceID) == nil {
			d.add("DEVICE_ADDED", "device", c.DeviceID, loc(d.cur, c.File, c.At("device_id")), nil,
				"device %s added (side_effect %s, risk %s)", c.DeviceID, c.Server.SideEffect, c.Server.Risk)
		}
	}
}

func (d *differ) device(p, c *spec.Device) {
	id := c.DeviceID
	cl := func(key string) *Location { return loc(d.cur, c.File, at(c, key, "device_id")) }
	pl := func(key string) *Location { return loc(d.prev, p.File, at(p, key, "device_id")) }
	ccl := func(key string) *Location {
		return loc(d.cur, c.File, at(c, "classification."+key, "classification", "device_id"))
	}
	pcl := func(key string) *Location {
		return loc(d.prev, p.File, at(p, "classification."+key, "classification", "device_id"))
	}
	d.classified("device", id, p.Server, c.Server, ccl, pcl)
	switch {
	case p.AllowTools != nil && c.AllowTools == nil:
		d.add("DEVICE_TOOLS_ALLOWED", "device", id, cl("device_id"), pl("allow_tools"),
			"allow_tools removed: every tool the device lists is now served")
	case p.AllowTools != nil:
		prev := map[string]bool{}
		for _, r := range p.AllowTools {
			prev[r.Name] = true
		}
		for _, r := range c.AllowTools {
			if !prev[r.Name] {
				d.add("DEVICE_TOOLS_ALLOWED", "device", id, loc(d.cur, c.File, r.Pos), pl("allow_tools"),
					"allow_tools now allows %s", r.Name)
			}
		}
	}
	switch {
	case p.Tenant == c.Tenant:
	case p.Tenant == "":
		// A device file from before tenants were required: its tools were served to
		// every tenant, and now to one. That narrows; it is still a change to see.
		d.add("DEVICE_CHANGED", "device", id, cl("tenant"), pl("tenant"),
			"device changed: tenant %s named (before, every tenant's principals saw its tools)", c.Tenant)
	case c.Tenant == "":
		d.add("DEVICE_TENANT_CHANGED", "device", id, cl("device_id"), pl("tenant"),
			"tenant %s removed: the device no longer says whose it is", p.Tenant)
	default:
		d.add("DEVICE_TENANT_CHANGED", "device", id, cl("tenant"), pl("tenant"),
			"tenant moved from %s to %s: %s's principals now see and call the device's tools", p.Tenant, c.Tenant, c.Tenant)
	}
	if p.TokenSHA256 != c.TokenSHA256 {
		d.add("DEVICE_CHANGED", "device", id, cl("token_sha256"), pl("token_sha256"),
			"device changed: token_sha256 (the token was rotated: the old one no longer connects)")
	}
}

// cl2 locates classification field key of server s: the field, else the
// classification, else the server_id.
func cl2(t *spec.Tree, s *spec.Server, key string) *Location {
	return loc(t, s.File, at(s, "classification."+key, "classification", "server_id"))
}

func protocolByName(t *spec.Tree, name string) *spec.Protocol {
	for _, p := range t.Protocols {
		if p.Name == name {
			return p
		}
	}
	return nil
}

func (d *differ) protocols() {
	for _, p := range d.prev.Protocols {
		c := protocolByName(d.cur, p.Name)
		if c == nil {
			d.add("PROTOCOL_REMOVED", "protocol", p.Name, nil, loc(d.prev, p.File, p.At("name")),
				"protocol %s removed", p.Name)
			continue
		}
		d.protocol(p, c)
	}
	for _, c := range d.cur.Protocols {
		if protocolByName(d.prev, c.Name) == nil {
			d.add("PROTOCOL_ADDED", "protocol", c.Name, loc(d.cur, c.File, c.At("name")), nil,
				"protocol %s added with modes %s", c.Name, modeNames(c.Modes))
		}
	}
}

func modeNames(ms []*spec.Mode) string {
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	return strings.Join(names, ", ")
}

func (d *differ) protocol(p, c *spec.Protocol) {
	name := c.Name
	cl := func(key string) *Location { return loc(d.cur, c.File, at(c, key, "name")) }
	pl := func(key string) *Location { return loc(d.prev, p.File, at(p, key, "name")) }
	effective := c.ExclusiveSet(d.cur.KnownTools())
	for _, cm := range c.Modes {
		pm := p.Mode(cm.Name)
		if pm == nil {
			// A new mode only narrows what an actor in it can do compared with no mode at
			// all; whether it shares an exclusive tool with another mode is WF-1, which
			// toolgen check enforces. The message lists what the mode holds for review.
			held := make([]string, len(cm.Tools))
			for i, t := range cm.Tools {
				held[i] = t.Name
				if _, ex := effective[t.Name]; ex {
					held[i] += " (exclusive)"
				}
			}
			what := "no tools"
			if len(held) > 0 {
				what = strings.Join(held, ", ")
			}
			d.add("MODE_ADDED", "protocol", name, loc(d.cur, c.File, cm.Pos), pl("modes"),
				"mode %s added with %s", cm.Name, what)
			continue
		}
		prevTools := refNames(pm.Tools)
		for _, t := range cm.Tools {
			if !slices.Contains(prevTools, t.Name) {
				d.add("MODE_TOOL_ADDED", "protocol", name, loc(d.cur, c.File, t.Pos), loc(d.prev, p.File, at(pm, "tools")),
					"%s added to mode %s", t.Name, cm.Name)
			}
		}
		curTools := refNames(cm.Tools)
		for _, t := range pm.Tools {
			if !slices.Contains(curTools, t.Name) {
				d.add("MODE_TOOL_REMOVED", "protocol", name, loc(d.cur, c.File, at(cm, "tools")), loc(d.prev, p.File, t.Pos),
					"%s removed from mode %s", t.Name, cm.Name)
			}
		}
	}
	for _, pm := range p.Modes {
		if c.Mode(pm.Name) == nil {
			d.add("MODE_REMOVED", "protocol", name, cl("modes"), loc(d.prev, p.File, pm.Pos),
				"mode %s removed", pm.Name)
		}
	}
	// Exclusive tools: the declaration shrank.
	declared := refNames(c.ExclusiveTools)
	for _, t := range p.ExclusiveTools {
		if slices.Contains(declared, t.Name) {
			continue
		}
		if _, still := effective[t.Name]; still {
			d.add("EXCLUSIVE_DECLARATION_DROPPED", "protocol", name, cl("exclusive_tools"), loc(d.prev, p.File, t.Pos),
				"%s no longer declared in exclusive_tools, but it is still exclusive (default or confers_approval, WF-2)", t.Name)
			continue
		}
		d.add("EXCLUSIVE_TOOL_DROPPED", "protocol", name, cl("exclusive_tools"), loc(d.prev, p.File, t.Pos),
			"%s is no longer exclusive: one mode's actor may now share it with another mode (WF-1)", t.Name)
	}
	if p.InitialMode.Name != c.InitialMode.Name {
		d.add("PROTOCOL_CHANGED", "protocol", name, cl("initial_mode"), pl("initial_mode"),
			"protocol changed: initial_mode %s -> %s", p.InitialMode.Name, c.InitialMode.Name)
	}
	prevDeclared := refNames(p.ExclusiveTools)
	for _, t := range c.ExclusiveTools {
		if !slices.Contains(prevDeclared, t.Name) {
			d.add("PROTOCOL_CHANGED", "protocol", name, loc(d.cur, c.File, t.Pos), pl("exclusive_tools"),
				"protocol changed: exclusive tool %s declared", t.Name)
		}
	}
}

func (d *differ) policy() {
	pp, cp := d.prev.Policy, d.cur.Policy
	var pRules, cRules []*spec.Rule
	var pHosts, cHosts []spec.Ref
	if pp != nil {
		pRules, pHosts = pp.Rules, pp.EgressAllow
	}
	if cp != nil {
		cRules, cHosts = cp.Rules, cp.EgressAllow
	}
	// cl and pl locate a key of policy.yaml, or nothing when the file is absent.
	cl := func(key string) *Location {
		if cp == nil {
			return nil
		}
		return loc(d.cur, cp.File, at(cp, key))
	}
	pl := func(key string) *Location {
		if pp == nil {
			return nil
		}
		return loc(d.prev, pp.File, at(pp, key))
	}
	find := func(rs []*spec.Rule, name string) *spec.Rule {
		for _, r := range rs {
			if r.Name == name {
				return r
			}
		}
		return nil
	}
	whenPos := func(r *spec.Rule) spec.Pos {
		if r.When != nil {
			return r.When.Pos
		}
		return r.Pos
	}
	for _, p := range pRules {
		c := find(cRules, p.Name)
		if c == nil {
			if p.Effect == "allow" {
				d.add("POLICY_ALLOW_RULE_REMOVED", "policy", p.Name, cl("rules"), loc(d.prev, pp.File, p.Pos),
					"allow rule %s removed", p.Name)
			} else {
				d.add("POLICY_RULE_REMOVED", "policy", p.Name, cl("rules"), loc(d.prev, pp.File, p.Pos),
					"%s rule %s removed: %s", p.Effect, p.Name, exprText(p.When))
			}
			continue
		}
		// One finding per changed part, each at its own key.
		if p.Effect != c.Effect {
			d.add("POLICY_RULE_CHANGED", "policy", c.Name, loc(d.cur, cp.File, whenPos(c)), loc(d.prev, pp.File, whenPos(p)),
				"rule %s changed: effect %s -> %s", c.Name, p.Effect, c.Effect)
		}
		if pw, cw := exprText(p.When), exprText(c.When); pw != cw {
			d.add("POLICY_RULE_CHANGED", "policy", c.Name, loc(d.cur, cp.File, whenPos(c)), loc(d.prev, pp.File, whenPos(p)),
				"rule %s changed: condition %q -> %q", c.Name, pw, cw)
		}
		if !slices.Equal(refNames(p.Tools), refNames(c.Tools)) {
			d.add("POLICY_RULE_CHANGED", "policy", c.Name, loc(d.cur, cp.File, at(c, "tools", "name")),
				loc(d.prev, pp.File, at(p, "tools", "name")), "rule %s changed: tools [%s] -> [%s]", c.Name,
				strings.Join(refNames(p.Tools), ", "), strings.Join(refNames(c.Tools), ", "))
		}
	}
	for _, c := range cRules {
		if find(pRules, c.Name) != nil {
			continue
		}
		if c.Effect == "allow" {
			d.add("POLICY_ALLOW_RULE_ADDED", "policy", c.Name, loc(d.cur, cp.File, c.Pos), pl("rules"),
				"allow rule %s added: it waives trust- and risk-based approvals when %s", c.Name, exprText(c.When))
		} else {
			d.add("POLICY_RULE_ADDED", "policy", c.Name, loc(d.cur, cp.File, c.Pos), pl("rules"),
				"%s rule %s added", c.Effect, c.Name)
		}
	}
	pSet, cSet := refNames(pHosts), refNames(cHosts)
	for _, h := range cHosts {
		if !slices.Contains(pSet, h.Name) {
			d.add("EGRESS_HOST_ADDED", "policy", "egress", loc(d.cur, cp.File, h.Pos), pl("egress.allow"),
				"egress host %s added: tenant servers may now name it", h.Name)
		}
	}
	for _, h := range pHosts {
		if !slices.Contains(cSet, h.Name) {
			d.add("EGRESS_HOST_REMOVED", "policy", "egress", cl("egress.allow"), loc(d.prev, pp.File, h.Pos),
				"egress host %s removed", h.Name)
		}
	}
}

// acknowledge applies the tools' `acknowledge` entries (see the package documentation):
// an entry new in this change marks the findings of its rule on its tool acknowledged;
// an entry carried over from the previous tree applies to nothing, and is reported as
// ACKNOWLEDGEMENT_STALE when the tool's version changed or its rule fired again.
func (d *differ) acknowledge() {
	type key struct{ tool, rule string }
	fired := map[key]bool{}
	for _, f := range d.out {
		if f.Kind == "tool" {
			fired[key{f.Subject, f.Rule}] = true
		}
	}
	signed := map[key]bool{}
	for _, c := range d.cur.Tools {
		p := d.prev.Tool(c.Name)
		for _, a := range c.Acknowledge {
			k := key{c.Name, a.Name}
			var carried *spec.Ref
			if p != nil {
				if i := slices.IndexFunc(p.Acknowledge, func(r spec.Ref) bool { return r.Name == a.Name }); i >= 0 {
					carried = &p.Acknowledge[i]
				}
			}
			switch {
			case carried == nil:
				signed[k] = true
			case c.Version != p.Version:
				d.add("ACKNOWLEDGEMENT_STALE", "tool", c.Name, loc(d.cur, c.File, a.Pos), loc(d.prev, p.File, carried.Pos),
					"acknowledge %s was written for version %d and the version is now %d: it acknowledges nothing any more; remove it",
					a.Name, p.Version, c.Version)
			case fired[k]:
				d.add("ACKNOWLEDGEMENT_STALE", "tool", c.Name, loc(d.cur, c.File, a.Pos), loc(d.prev, p.File, carried.Pos),
					"acknowledge %s is carried over from the previous tree, where it signed off an earlier change: it does not sign off this one (remove it, and add it again once the removal is in)",
					a.Name)
			}
		}
	}
	for i, f := range d.out {
		if f.Kind == "tool" && signed[key{f.Subject, f.Rule}] && Acknowledgeable(f.Rule) {
			d.out[i].Acknowledged = true
		}
	}
}

// issuers compares the OIDC/JWT issuers of principals.yaml, matched by name (a name is
// the namespace of its principals' ids, so a renamed issuer is a removal and an
// addition). Who may mint principals, and of which tenants, is what a reviewer must
// see: issue 14, finding 6 was one tenant's identity provider minting a token for
// another tenant's approver.
func (d *differ) issuers() {
	var pIss, cIss []*spec.Issuer
	var pFile, cFile string
	if d.prev.Principals != nil {
		pIss, pFile = d.prev.Principals.Issuers, d.prev.Principals.File
	}
	if d.cur.Principals != nil {
		cIss, cFile = d.cur.Principals.Issuers, d.cur.Principals.File
	}
	find := func(list []*spec.Issuer, name string) *spec.Issuer {
		for _, is := range list {
			if is.Name == name {
				return is
			}
		}
		return nil
	}
	binding := func(is *spec.Issuer) string {
		if is.Tenant != "" {
			return "tenant"
		}
		return "tenants"
	}
	for _, p := range pIss {
		if find(cIss, p.Name) == nil {
			var cur *Location
			if d.cur.Principals != nil {
				cur = loc(d.cur, cFile, d.cur.Principals.KeyAt("issuers"))
			}
			d.add("ISSUER_REMOVED", "issuer", p.Name, cur, loc(d.prev, pFile, p.Pos),
				"issuer %s (%s) removed: its tokens no longer verify", p.Name, p.Issuer)
		}
	}
	for _, c := range cIss {
		p := find(pIss, c.Name)
		cl := func(key string) *Location { return loc(d.cur, cFile, at(c, key, "name")) }
		if p == nil {
			var prev *Location
			if d.prev.Principals != nil {
				prev = loc(d.prev, pFile, d.prev.Principals.KeyAt("issuers"))
			}
			d.add("ISSUER_ADDED", "issuer", c.Name, loc(d.cur, cFile, c.Pos), prev,
				"issuer %s (%s) added: its tokens now prove principals of tenant %s", c.Name, c.Issuer, strings.Join(c.TenantNames(), ", "))
			continue
		}
		pl := func(key string) *Location { return loc(d.prev, pFile, at(p, key, "name")) }
		var widened []string
		for _, t := range c.TenantNames() {
			if !p.AssertsTenant(t) {
				widened = append(widened, t)
			}
		}
		if len(widened) > 0 {
			d.add("ISSUER_TENANTS_WIDENED", "issuer", c.Name, cl(binding(c)), pl(binding(p)),
				"issuer %s may now speak for tenant %s: its tokens can prove principals there", c.Name, strings.Join(widened, ", "))
		}
		for _, f := range []struct{ key, what, a, b string }{
			{"issuer", "issuer", p.Issuer, c.Issuer},
			{"audience", "audience", p.Audience, c.Audience},
			{"jwks_url", "jwks_url", p.JWKSURL, c.JWKSURL},
			{"key_file", "key_file", p.KeyFile, c.KeyFile},
			{"claims.id", "claims.id", p.IDClaim, c.IDClaim},
			{"claims.tenant", "claims.tenant", p.TenantClaim, c.TenantClaim},
		} {
			if f.key == "claims.tenant" && (p.Tenant != "" || c.Tenant != "") {
				continue // a one-tenant issuer reads no tenant claim: the binding says it all
			}
			if f.a != f.b {
				d.add("ISSUER_CHANGED", "issuer", c.Name, cl(f.key), pl(f.key),
					"issuer %s: %s changed from %q to %q: other tokens may now prove its principals", c.Name, f.what, f.a, f.b)
			}
		}
		added := []string{}
		for _, a := range c.Algorithms {
			if !slices.Contains(p.Algorithms, a) {
				added = append(added, a)
			}
		}
		if len(added) > 0 {
			d.add("ISSUER_CHANGED", "issuer", c.Name, cl("algorithms"), pl("algorithms"),
				"issuer %s: algorithm %s now accepted", c.Name, strings.Join(added, ", "))
		}
		d.issuerConsole(p, c, cl, pl)
	}
	for _, c := range cIss {
		if p := find(pIss, c.Name); p == nil && c.Console != nil {
			d.add("CONSOLE_SIGNIN_ADDED", "issuer", c.Name, loc(d.cur, cFile, at(c, "console")), nil,
				"issuer %s: its people (tenant %s) may now sign in to the console as client %s", c.Name, strings.Join(c.TenantNames(), ", "), c.Console.ClientID)
		}
	}
}

// issuerConsole compares the console sign-in of an issuer present in both trees
// (issue 18): who may sign in to the console, and as which client of the issuer.
func (d *differ) issuerConsole(p, c *spec.Issuer, cl, pl func(string) *Location) {
	switch {
	case p.Console == nil && c.Console == nil:
		return
	case p.Console == nil:
		d.add("CONSOLE_SIGNIN_ADDED", "issuer", c.Name, cl("console"), pl("name"),
			"issuer %s: its people (tenant %s) may now sign in to the console as client %s", c.Name, strings.Join(c.TenantNames(), ", "), c.Console.ClientID)
		return
	case c.Console == nil:
		d.add("CONSOLE_SIGNIN_REMOVED", "issuer", c.Name, cl("name"), pl("console"),
			"issuer %s: console sign-in removed: its people no longer sign in to the console", c.Name)
		return
	}
	pc, cc := p.Console, c.Console
	if pc.ClientID != cc.ClientID {
		d.add("ISSUER_CHANGED", "issuer", c.Name, cl("console.client_id"), pl("console.client_id"),
			"issuer %s: console.client_id changed from %q to %q: another client's ID tokens now sign people in to the console", c.Name, pc.ClientID, cc.ClientID)
	}
	if pc.ClientSecretEnv != "" && cc.ClientSecretEnv == "" {
		d.add("ISSUER_CHANGED", "issuer", c.Name, cl("console"), pl("console.client_secret_env"),
			"issuer %s: console.client_secret_env removed: the console is now a public client, authenticated by PKCE alone", c.Name)
	}
	if pc.RedirectURL != cc.RedirectURL {
		d.add("ISSUER_CHANGED", "issuer", c.Name, cl("console.redirect_url"), pl("console.redirect_url"),
			"issuer %s: console.redirect_url changed from %q to %q: sign-in answers now go there", c.Name, pc.RedirectURL, cc.RedirectURL)
	}
}

// notifications compares notifications.yaml (issue 18): where the classifications of
// held and UNCERTAIN calls go, of which tenants, signed or not, and where the links in
// them lead. Webhooks are matched by name.
func (d *differ) notifications() {
	pn, cn := d.prev.Notifications, d.cur.Notifications
	var pHooks, cHooks []*spec.Webhook
	if pn != nil {
		pHooks = pn.Webhooks
	}
	if cn != nil {
		cHooks = cn.Webhooks
	}
	dest := func(w *spec.Webhook) string {
		if w.URLEnv != "" {
			return "the URL in $" + w.URLEnv
		}
		return w.URL
	}
	tenants := func(w *spec.Webhook) string {
		if w.Tenants == nil {
			return "every tenant"
		}
		return "tenant " + strings.Join(w.TenantNames(), ", ")
	}
	find := func(list []*spec.Webhook, name string) *spec.Webhook {
		for _, w := range list {
			if w.Name == name {
				return w
			}
		}
		return nil
	}
	for _, p := range pHooks {
		if find(cHooks, p.Name) == nil {
			var cur *Location
			if cn != nil {
				cur = loc(d.cur, cn.File, at(cn, "webhooks"))
			}
			d.add("WEBHOOK_REMOVED", "webhook", p.Name, cur, loc(d.prev, pn.File, p.Pos),
				"webhook %s removed: %s is no longer told of held or UNCERTAIN calls", p.Name, dest(p))
		}
	}
	for _, c := range cHooks {
		p := find(pHooks, c.Name)
		if p == nil {
			var prev *Location
			if pn != nil {
				prev = loc(d.prev, pn.File, at(pn, "webhooks"))
			}
			d.add("WEBHOOK_ADDED", "webhook", c.Name, loc(d.cur, cn.File, c.Pos), prev,
				"webhook %s added: the classifications of %s calls of %s now go to %s", c.Name, strings.Join(c.EventNames(), " and "), tenants(c), dest(c))
			continue
		}
		cl := func(key string) *Location { return loc(d.cur, cn.File, at(c, key, "name")) }
		pl := func(key string) *Location { return loc(d.prev, pn.File, at(p, key, "name")) }
		if p.URL != c.URL || p.URLEnv != c.URLEnv {
			key := func(w *spec.Webhook) string {
				if w.URLEnv != "" {
					return "url_env"
				}
				return "url"
			}
			d.add("WEBHOOK_DESTINATION_CHANGED", "webhook", c.Name, cl(key(c)), pl(key(p)),
				"webhook %s: messages now go to %s instead of %s", c.Name, dest(c), dest(p))
		}
		var widened []string
		for _, t := range c.TenantNames() {
			if p.Tenants != nil && !slices.Contains(p.TenantNames(), t) {
				widened = append(widened, t)
			}
		}
		switch {
		case p.Tenants != nil && c.Tenants == nil:
			d.add("WEBHOOK_TENANTS_WIDENED", "webhook", c.Name, cl("name"), pl("tenants"),
				"webhook %s: tenants removed: it is now told of every tenant's calls", c.Name)
		case len(widened) > 0:
			d.add("WEBHOOK_TENANTS_WIDENED", "webhook", c.Name, cl("tenants"), pl("tenants"),
				"webhook %s: now told of the calls of tenant %s", c.Name, strings.Join(widened, ", "))
		}
		if p.Signed() && !c.Signed() {
			d.add("WEBHOOK_UNSIGNED", "webhook", c.Name, cl("name"), pl("secret_env"),
				"webhook %s: secret_env removed: its messages are no longer signed, so its receiver cannot tell them from forgeries", c.Name)
		}
		for _, f := range []struct{ key, a, b string }{
			{"format", p.Format, c.Format},
			{"events", strings.Join(p.EventNames(), ", "), strings.Join(c.EventNames(), ", ")},
			{"secret_env", p.SecretEnv, c.SecretEnv},
			{"max_attempts", fmt.Sprint(p.MaxAttempts), fmt.Sprint(c.MaxAttempts)},
			{"timeout", p.Timeout.String(), c.Timeout.String()},
		} {
			if f.a == f.b || f.key == "secret_env" && f.b == "" {
				continue
			}
			d.add("WEBHOOK_CHANGED", "webhook", c.Name, cl(f.key), pl(f.key),
				"webhook %s: %s changed from %q to %q", c.Name, f.key, f.a, f.b)
		}
	}
	if pn != nil && cn != nil && pn.ConsoleURL != cn.ConsoleURL && pn.ConsoleURL != "" {
		d.add("CONSOLE_URL_CHANGED", "notifications", "console_url", loc(d.cur, cn.File, at(cn, "console_url")), loc(d.prev, pn.File, at(pn, "console_url")),
			"console_url changed from %q to %q: the links reviewers follow from a message now lead there", pn.ConsoleURL, cn.ConsoleURL)
	}
}
