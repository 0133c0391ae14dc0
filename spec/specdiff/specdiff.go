package specdiff

import (
	"cmp"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/toolgen/toolgen/spec"
)

// Severity is a finding's category.
type Severity string

const (
	Weakens  Severity = "weakens"  // the platform will do more without a person
	Breaking Severity = "breaking" // callers (or recorded results) no longer fit
	Info     Severity = "info"     // anything else that changed the catalog or a spec
)

// Location is a position in a spec file: the path as the tree's Root displays it, and
// a 1-based line and column. The zero Location means "none".
type Location struct {
	File string `json:"file"`
	Line int    `json:"line"`
	Col  int    `json:"column"`
}

// IsZero reports whether l is no location.
func (l Location) IsZero() bool { return l.File == "" }

func (l Location) String() string { return fmt.Sprintf("%s:%d:%d", l.File, l.Line, l.Col) }

// Finding is one reported change.
type Finding struct {
	Rule     string   `json:"rule"`
	Severity Severity `json:"severity"`
	// Kind is what Subject names: tool, server, protocol or policy.
	Kind string `json:"kind"`
	// Subject is the tool name, server id, protocol name, or policy rule name
	// ("egress" for the egress allowlist).
	Subject string    `json:"subject"`
	Message string    `json:"message"`
	Cur     *Location `json:"current,omitempty"`
	Prev    *Location `json:"previous,omitempty"`
}

// At is the finding's primary location: Cur, or Prev for a removed thing.
func (f Finding) At() Location {
	if f.Cur != nil {
		return *f.Cur
	}
	if f.Prev != nil {
		return *f.Prev
	}
	return Location{}
}

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
	d.protocols()
	d.policy()
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
	f := rel
	if t.Root != "" && t.Root != "." {
		f = path.Join(strings.ReplaceAll(t.Root, "\\", "/"), rel)
	}
	if p.Line <= 0 {
		p = spec.Pos{Line: 1, Col: 1}
	}
	if p.Col <= 0 {
		p.Col = 1
	}
	return &Location{File: f, Line: p.Line, Col: p.Col}
}

func (d *differ) add(rule string, sev Severity, kind, subject string, cur, prev *Location, format string, a ...any) {
	d.out = append(d.out, Finding{Rule: rule, Severity: sev, Kind: kind, Subject: subject,
		Message: fmt.Sprintf(format, a...), Cur: cur, Prev: prev})
}

// Orders; a higher rank is safer (more restrictive).
var (
	idempotencyRank = map[string]int{"idempotent": 0, "conditionally_idempotent": 1, "non_idempotent": 2}
	sideEffectRank  = map[string]int{"none": 0, "read": 1, "write": 2}
	riskRank        = map[string]int{"low": 0, "medium": 1, "high": 2, "critical": 3}
	trustRank       = map[string]int{"system": 0, "user": 1, "tool": 2, "external_untrusted": 3}
)

// lowered reports whether v moved from a and b are both known and b ranks below a.
func lowered(rank map[string]int, from, to string) bool {
	a, okA := rank[from]
	b, okB := rank[to]
	return okA && okB && b < a
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
			d.add("TOOL_REMOVED", Breaking, "tool", p.Name, nil, loc(d.prev, p.File, p.At("name")),
				"tool %s removed; callers and pinned catalogs that name it break", p.Name)
			continue
		}
		d.tool(p, c)
	}
	for _, c := range d.cur.Tools {
		if d.prev.Tool(c.Name) == nil {
			d.add("TOOL_ADDED", Info, "tool", c.Name, loc(d.cur, c.File, c.At("name")), nil,
				"tool %s added (side_effect %s, risk %s)", c.Name, c.SideEffect, c.Risk)
		}
	}
}

// classification compares the fields tools and servers share.
func (d *differ) classification(kind, subject string, cl, pl func(key string) *Location,
	pSide, cSide, pIdem, cIdem, pRisk, cRisk string, pScopes, cScopes []spec.Ref, scopeLoc func(spec.Ref) *Location) {
	if lowered(idempotencyRank, pIdem, cIdem) {
		d.add("IDEMPOTENCY_LOOSENED", Weakens, kind, subject, cl("idempotency"), pl("idempotency"),
			"idempotency loosened from %s to %s: retries after an unknown outcome now run the effect again without asking", pIdem, cIdem)
	}
	if lowered(sideEffectRank, pSide, cSide) {
		d.add("SIDE_EFFECT_LOWERED", Weakens, kind, subject, cl("side_effect"), pl("side_effect"),
			"side_effect lowered from %s to %s", pSide, cSide)
	}
	if lowered(riskRank, pRisk, cRisk) {
		d.add("RISK_LOWERED", Weakens, kind, subject, cl("risk"), pl("risk"),
			"risk lowered from %s to %s: fewer calls need approval", pRisk, cRisk)
	}
	have := map[string]bool{}
	for _, s := range cScopes {
		have[s.Name] = true
	}
	for _, s := range pScopes {
		if !have[s.Name] {
			d.add("SCOPE_REMOVED", Weakens, kind, subject, cl("required_scopes"), scopeLoc(s),
				"required scope %s removed: principals without it may now call", s.Name)
		}
	}
}

func (d *differ) tool(p, c *spec.Tool) {
	name := c.Name
	cl := func(key string) *Location { return loc(d.cur, c.File, toolAt(c, key)) }
	pl := func(key string) *Location { return loc(d.prev, p.File, toolAt(p, key)) }
	d.classification("tool", name, cl, pl, p.SideEffect, c.SideEffect, p.Idempotency, c.Idempotency, p.Risk, c.Risk,
		p.RequiredScopes, c.RequiredScopes, func(r spec.Ref) *Location { return loc(d.prev, p.File, r.Pos) })
	if pw, cw := exprText(p.IdempotentWhen), exprText(c.IdempotentWhen); pw != "" && cw != "" && pw != cw {
		d.add("IDEMPOTENT_WHEN_CHANGED", Weakens, "tool", name, cl("idempotent_when"), pl("idempotent_when"),
			"idempotent_when changed from %q to %q: review when a retry is safe", pw, cw)
	}
	if lowered(trustRank, p.OutputTrust, c.OutputTrust) {
		d.add("OUTPUT_TRUST_RAISED", Weakens, "tool", name, cl("output_trust"), pl("output_trust"),
			"output_trust raised from %s to %s: its results are believed more", p.OutputTrust, c.OutputTrust)
	}
	pa, ca := exprText(p.ApprovalWhen), exprText(c.ApprovalWhen)
	switch {
	case pa != "" && ca == "":
		d.add("APPROVAL_WHEN_REMOVED", Weakens, "tool", name, cl("name"), pl("approval_when"),
			"approval_when %q removed: those calls no longer wait for a person", pa)
	case pa != "" && pa != ca:
		d.add("APPROVAL_WHEN_CHANGED", Weakens, "tool", name, cl("approval_when"), pl("approval_when"),
			"approval_when changed from %q to %q: review whether it still asks when it must", pa, ca)
	}
	if !p.ParallelSafe && c.ParallelSafe {
		d.add("PARALLEL_SAFE_ENABLED", Weakens, "tool", name, cl("parallel_safe"), pl("parallel_safe"),
			"parallel_safe turned on: the tool may now share a parallel batch")
	}
	if p.ConfersApproval && !c.ConfersApproval {
		d.add("CONFERS_APPROVAL_DISABLED", Weakens, "tool", name, cl("confers_approval"), pl("confers_approval"),
			"confers_approval turned off: the tool leaves every protocol's exclusive set unless declared there (WF-2)")
	}

	// Compatibility of the argument schema.
	d.fields(name, p, c, "args", p.Args, c.Args, cl("args"))

	// VERSION_NOT_BUMPED: behaviour-affecting fields.
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
		d.add("VERSION_NOT_BUMPED", Breaking, "tool", name, cl("version"), pl("version"),
			"%s changed but version stayed %d (was %d): the idempotency key includes the version, so bump it",
			strings.Join(changed, ", "), c.Version, p.Version)
	}

	// TOOL_CHANGED: the rest of the catalog entry.
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
		{"output.max_bytes", "output", p.OutputMaxBytes, c.OutputMaxBytes},
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
		d.add("TOOL_CHANGED", Info, "tool", name, cl(key), pl(key), "catalog entry changed: %s", strings.Join(labels, ", "))
	}
}

func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(slices.Compact(a), slices.Compact(b))
}

// toolAt is the position of key's value, or of the tool's name when key is absent.
func toolAt(t *spec.Tool, key string) spec.Pos {
	if p := t.At(key); p != t.At("") {
		return p
	}
	return t.At("name")
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
func (d *differ) fields(tool string, p, c *spec.Tool, prefix string, pf, cf []*spec.Field, parent *Location) {
	byName := map[string]*spec.Field{}
	for _, f := range pf {
		byName[f.Name] = f
	}
	have := map[string]bool{}
	for _, f := range cf {
		have[f.Name] = true
		d.field(tool, p, c, prefix+"."+f.Name, byName[f.Name], f)
	}
	for _, f := range pf {
		if !have[f.Name] {
			d.add("ARG_REMOVED", Breaking, "tool", tool, parent, loc(d.prev, p.File, f.Pos),
				"argument %s removed: callers that send it are rejected", strings.TrimPrefix(prefix+"."+f.Name, "args."))
		}
	}
}

func (d *differ) field(tool string, p, c *spec.Tool, name string, pf, cf *spec.Field) {
	shown := strings.TrimPrefix(name, "args.")
	cl := func(key string) *Location { return loc(d.cur, c.File, cf.At(key)) }
	if pf == nil {
		if cf.Required {
			d.add("ARG_NEWLY_REQUIRED", Breaking, "tool", tool, loc(d.cur, c.File, cf.Pos), nil,
				"new argument %s is required: existing callers do not send it", shown)
		}
		return
	}
	pl := func(key string) *Location { return loc(d.prev, p.File, pf.At(key)) }
	if pf.Type != cf.Type {
		d.add("ARG_TYPE_CHANGED", Breaking, "tool", tool, cl("type"), pl("type"),
			"argument %s changed type from %s to %s", shown, pf.Type, cf.Type)
		return
	}
	if cf.Required && !pf.Required {
		d.add("ARG_NEWLY_REQUIRED", Breaking, "tool", tool, loc(d.cur, c.File, cf.Pos), loc(d.prev, p.File, pf.Pos),
			"argument %s was optional and is now required", shown)
	}
	if len(cf.Enum) > 0 {
		for i, v := range pf.Enum {
			if !slices.ContainsFunc(cf.Enum, func(x any) bool { return fmt.Sprint(x) == fmt.Sprint(v) }) {
				prevAt := pl("enum")
				if i < len(pf.EnumPos) {
					prevAt = loc(d.prev, p.File, pf.EnumPos[i])
				}
				d.add("ENUM_VALUE_REMOVED", Breaking, "tool", tool, cl("enum"), prevAt,
					"argument %s no longer accepts %v", shown, v)
			}
		}
	}
	if pf.Items != nil && cf.Items != nil {
		d.field(tool, p, c, name+"[]", pf.Items, cf.Items)
	}
	if cf.Type == spec.TypeObject {
		d.fields(tool, p, c, name, pf.Properties, cf.Properties, loc(d.cur, c.File, cf.Pos))
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
	fmt.Fprintf(b, " %q", f.Pattern)
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
			d.add("SERVER_REMOVED", Info, "server", p.ServerID, nil, loc(d.prev, p.File, p.At("server_id")),
				"server %s removed", p.ServerID)
			continue
		}
		d.server(p, c)
	}
	for _, c := range d.cur.Servers {
		if d.prev.Server(c.ServerID) == nil {
			d.add("SERVER_ADDED", Info, "server", c.ServerID, loc(d.cur, c.File, c.At("server_id")), nil,
				"server %s added (configured_by %s)", c.ServerID, c.ConfiguredBy)
		}
	}
}

func (d *differ) server(p, c *spec.Server) {
	id := c.ServerID
	cl := func(key string) *Location { return loc(d.cur, c.File, c.At(key)) }
	pl := func(key string) *Location { return loc(d.prev, p.File, p.At(key)) }
	if p.ConfiguredBy == "operator" && c.ConfiguredBy == "tenant" {
		d.add("SERVER_TO_TENANT", Weakens, "server", id, cl("configured_by"), pl("configured_by"),
			"configured_by moved from operator to tenant: a tenant now decides what this server is")
	}
	if p.Stdio == nil && c.Stdio != nil {
		d.add("SERVER_TO_STDIO", Weakens, "server", id, cl("transport"), pl("transport"),
			"transport moved to stdio: the server now runs as a local subprocess")
	}
	// A classification field newly left out falls back to its most restrictive value.
	newlyDefaulted := map[string]bool{}
	for _, f := range c.Defaulted {
		if !slices.Contains(p.Defaulted, f) {
			newlyDefaulted[f] = true
			d.add("SERVER_CLASSIFICATION_DEFAULTED", Info, "server", id, cl("classification"), pl("classification"),
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
	d.classification("server", id, func(string) *Location { return cl("classification") },
		func(string) *Location { return pl("classification") }, ps, cs, pi, ci, pr, cr, p.RequiredScopes, cScopes,
		func(spec.Ref) *Location { return pl("classification") })

	var other []string
	switch {
	case p.Stdio == nil && c.Stdio != nil:
		// SERVER_TO_STDIO says it.
	case (p.HTTP == nil) != (c.HTTP == nil) || p.HTTP != nil && p.HTTP.URL != c.HTTP.URL:
		other = append(other, "transport")
	case p.Stdio != nil && c.Stdio != nil && (p.Stdio.Command != c.Stdio.Command ||
		!slices.Equal(p.Stdio.Args, c.Stdio.Args) || fmt.Sprint(p.Stdio.Env) != fmt.Sprint(c.Stdio.Env)):
		other = append(other, "transport")
	}
	if p.ConfiguredBy != c.ConfiguredBy && !(p.ConfiguredBy == "operator" && c.ConfiguredBy == "tenant") {
		other = append(other, "configured_by")
	}
	if p.Resources != c.Resources {
		other = append(other, "resources "+p.Resources+" -> "+c.Resources)
	}
	if p.Prompts != c.Prompts {
		other = append(other, "prompts "+p.Prompts+" -> "+c.Prompts)
	}
	if len(other) > 0 {
		d.add("SERVER_CHANGED", Info, "server", id, cl("server_id"), pl("server_id"), "server changed: %s", strings.Join(other, ", "))
	}
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
			d.add("PROTOCOL_REMOVED", Info, "protocol", p.Name, nil, loc(d.prev, p.File, spec.Pos{}),
				"protocol %s removed", p.Name)
			continue
		}
		d.protocol(p, c)
	}
	for _, c := range d.cur.Protocols {
		if protocolByName(d.prev, c.Name) == nil {
			d.add("PROTOCOL_ADDED", Info, "protocol", c.Name, loc(d.cur, c.File, spec.Pos{}), nil,
				"protocol %s added", c.Name)
		}
	}
}

func (d *differ) protocol(p, c *spec.Protocol) {
	name := c.Name
	for _, cm := range c.Modes {
		pm := p.Mode(cm.Name)
		if pm == nil {
			d.add("MODE_ADDED", Info, "protocol", name, loc(d.cur, c.File, cm.Pos), nil,
				"mode %s added with %s", cm.Name, strings.Join(refNames(cm.Tools), ", "))
			continue
		}
		prevTools := refNames(pm.Tools)
		for _, t := range cm.Tools {
			if !slices.Contains(prevTools, t.Name) {
				d.add("MODE_TOOL_ADDED", Weakens, "protocol", name, loc(d.cur, c.File, t.Pos), loc(d.prev, p.File, pm.Pos),
					"%s added to mode %s", t.Name, cm.Name)
			}
		}
		curTools := refNames(cm.Tools)
		for _, t := range pm.Tools {
			if !slices.Contains(curTools, t.Name) {
				d.add("MODE_TOOL_REMOVED", Info, "protocol", name, loc(d.cur, c.File, cm.Pos), loc(d.prev, p.File, t.Pos),
					"%s removed from mode %s", t.Name, cm.Name)
			}
		}
	}
	for _, pm := range p.Modes {
		if c.Mode(pm.Name) == nil {
			d.add("MODE_REMOVED", Info, "protocol", name, nil, loc(d.prev, p.File, pm.Pos),
				"mode %s removed", pm.Name)
		}
	}
	// Exclusive tools: the declaration shrank.
	declared := refNames(c.ExclusiveTools)
	effective := c.ExclusiveSet(d.cur.Tools)
	curAt := loc(d.cur, c.File, spec.Pos{})
	if len(c.ExclusiveTools) > 0 {
		curAt = loc(d.cur, c.File, c.ExclusiveTools[0].Pos)
	}
	for _, t := range p.ExclusiveTools {
		if slices.Contains(declared, t.Name) {
			continue
		}
		if _, still := effective[t.Name]; still {
			d.add("EXCLUSIVE_DECLARATION_DROPPED", Info, "protocol", name, curAt, loc(d.prev, p.File, t.Pos),
				"%s no longer declared in exclusive_tools, but it is still exclusive (default or confers_approval, WF-2)", t.Name)
			continue
		}
		d.add("EXCLUSIVE_TOOL_DROPPED", Weakens, "protocol", name, curAt, loc(d.prev, p.File, t.Pos),
			"%s is no longer exclusive: one mode's actor may now share it with another mode (WF-1)", t.Name)
	}
	var other []string
	if p.InitialMode.Name != c.InitialMode.Name {
		other = append(other, fmt.Sprintf("initial_mode %s -> %s", p.InitialMode.Name, c.InitialMode.Name))
	}
	prevDeclared := refNames(p.ExclusiveTools)
	for _, t := range c.ExclusiveTools {
		if !slices.Contains(prevDeclared, t.Name) {
			other = append(other, "exclusive tool "+t.Name+" declared")
		}
	}
	if len(other) > 0 {
		at := loc(d.cur, c.File, c.InitialMode.Pos)
		d.add("PROTOCOL_CHANGED", Info, "protocol", name, at, loc(d.prev, p.File, p.InitialMode.Pos),
			"protocol changed: %s", strings.Join(other, ", "))
	}
}

func (d *differ) policy() {
	var pRules, cRules []*spec.Rule
	var pHosts, cHosts []spec.Ref
	var pFile, cFile string
	if d.prev.Policy != nil {
		pRules, pHosts, pFile = d.prev.Policy.Rules, d.prev.Policy.EgressAllow, d.prev.Policy.File
	}
	if d.cur.Policy != nil {
		cRules, cHosts, cFile = d.cur.Policy.Rules, d.cur.Policy.EgressAllow, d.cur.Policy.File
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
				d.add("POLICY_ALLOW_RULE_REMOVED", Info, "policy", p.Name, nil, loc(d.prev, pFile, p.Pos),
					"allow rule %s removed", p.Name)
			} else {
				d.add("POLICY_RULE_REMOVED", Weakens, "policy", p.Name, nil, loc(d.prev, pFile, p.Pos),
					"%s rule %s removed: %s", p.Effect, p.Name, exprText(p.When))
			}
			continue
		}
		var what []string
		if p.Effect != c.Effect {
			what = append(what, fmt.Sprintf("effect %s -> %s", p.Effect, c.Effect))
		}
		if pw, cw := exprText(p.When), exprText(c.When); pw != cw {
			what = append(what, fmt.Sprintf("condition %q -> %q", pw, cw))
		}
		if !slices.Equal(refNames(p.Tools), refNames(c.Tools)) {
			what = append(what, fmt.Sprintf("tools [%s] -> [%s]", strings.Join(refNames(p.Tools), ", "), strings.Join(refNames(c.Tools), ", ")))
		}
		if len(what) > 0 {
			d.add("POLICY_RULE_CHANGED", Weakens, "policy", c.Name, loc(d.cur, cFile, whenPos(c)), loc(d.prev, pFile, whenPos(p)),
				"rule %s changed: %s", c.Name, strings.Join(what, "; "))
		}
	}
	for _, c := range cRules {
		if find(pRules, c.Name) != nil {
			continue
		}
		if c.Effect == "allow" {
			d.add("POLICY_ALLOW_RULE_ADDED", Weakens, "policy", c.Name, loc(d.cur, cFile, c.Pos), nil,
				"allow rule %s added: it waives trust- and risk-based approvals when %s", c.Name, exprText(c.When))
		} else {
			d.add("POLICY_RULE_ADDED", Info, "policy", c.Name, loc(d.cur, cFile, c.Pos), nil,
				"%s rule %s added", c.Effect, c.Name)
		}
	}
	pSet, cSet := refNames(pHosts), refNames(cHosts)
	for _, h := range cHosts {
		if !slices.Contains(pSet, h.Name) {
			d.add("EGRESS_HOST_ADDED", Weakens, "policy", "egress", loc(d.cur, cFile, h.Pos), nil,
				"egress host %s added: tenant servers may now name it", h.Name)
		}
	}
	for _, h := range pHosts {
		if !slices.Contains(cSet, h.Name) {
			d.add("EGRESS_HOST_REMOVED", Info, "policy", "egress", nil, loc(d.prev, pFile, h.Pos),
				"egress host %s removed", h.Name)
		}
	}
}
