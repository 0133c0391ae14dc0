package upstream

import (
	"context"
	"errors"
	"fmt"
	"sort"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/toolgen/toolgen/runtime"
)

// Skill is one upstream prompt exposed as a skill (MCP-5, ADR-0021 decision 8): read-only
// and external_untrusted. Everything in it — name, description, argument descriptions,
// and the messages [Skill.Get] returns — was written by the server.
//
// A skill is never placed in a cacheable prefix: a consumer renders it (listing and
// content) only in the uncached, per-turn part of the context, labelled
// external_untrusted, so that a server's prompt list cannot rewrite a tenant's stable
// prefix (a cost attack and a cache-timing side channel, ADR-0021 decision 9).
type Skill struct {
	// Name is mcp.{server_id}.{normalized prompt name} (MCP-1 normalization); prompts
	// normalizing alike are dropped, like tools.
	Name string
	// RemoteName is the server's name for the prompt.
	RemoteName  string
	Description string
	Arguments   []SkillArgument
	// Trust is always external_untrusted.
	Trust runtime.Trust

	up *Upstream
}

// SkillArgument is one argument of a skill, as the server declares it.
type SkillArgument struct {
	Name        string
	Description string
	Required    bool
}

// Skills lists the server's prompts as skills, sorted by name; empty when the file says
// prompts: hide or the server offers none. The list follows prompts/list_changed.
func (u *Upstream) Skills() []Skill {
	u.mu.Lock()
	defer u.mu.Unlock()
	return append([]Skill(nil), u.skills...)
}

// Get fetches the prompt's messages (prompts/get) with args. Each message becomes one
// text item labelled external_untrusted and enveloped (runtime.Envelope) with the skill
// name as its source; non-text content becomes a placeholder. A prompt that answers with
// inputRequests is refused (MCP-6). Get does not run through the pipeline: it has no
// effect and returns untrusted text only.
func (s Skill) Get(ctx context.Context, args map[string]string) ([]runtime.Item, error) {
	if s.up == nil {
		return nil, errors.New("upstream: skill has no server")
	}
	cs, err := s.up.session()
	if err != nil {
		return nil, err
	}
	if args == nil {
		args = map[string]string{}
	}
	res, err := safeCall(ctx, func(ctx context.Context) (*mcp.GetPromptResult, error) {
		return cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: s.RemoteName, Arguments: args})
	})
	if err != nil {
		return nil, fmt.Errorf("%s: prompts/get: %w", s.Name, err)
	}
	if res.NeedsInput() || res.InputRequests != nil {
		for _, m := range inputMethods(res.InputRequests) {
			s.up.refused(ctx, m, "inputRequests of "+s.Name)
		}
		return nil, fmt.Errorf("%s: prompts/get: %s: the server asked for client input, which is never granted", s.Name, runtime.ReasonInputRequestDeclined)
	}
	var items []runtime.Item
	for _, m := range res.Messages {
		if m == nil {
			continue
		}
		mapped, _ := mapContent(ctx, nil, []mcp.Content{m.Content})
		for _, it := range mapped {
			it.Text = runtime.Envelope(runtime.TrustExternalUntrusted, s.Name+" ("+oneLine(string(m.Role))+")", it.Text)
			items = append(items, it)
		}
	}
	return items, nil
}

// refreshSkills re-lists the prompts when the file exposes them.
func (u *Upstream) refreshSkills(ctx context.Context) error {
	if u.opts.Server.Prompts != "expose" {
		return nil
	}
	cs := u.current()
	ir := cs.InitializeResult()
	if ir == nil || ir.Capabilities == nil || ir.Capabilities.Prompts == nil {
		return nil
	}
	prompts, err := listAll(ctx, func(ctx context.Context, cursor string) ([]*mcp.Prompt, string, error) {
		r, err := cs.ListPrompts(ctx, &mcp.ListPromptsParams{Cursor: cursor})
		if err != nil {
			return nil, "", err
		}
		return r.Prompts, r.NextCursor, nil
	})
	if err != nil {
		return err
	}
	groups := map[string][]*mcp.Prompt{}
	for _, p := range prompts {
		name, err := DomainToolName(u.domain, u.id, p.Name)
		if err != nil {
			continue
		}
		groups[name] = append(groups[name], p)
	}
	var skills []Skill
	for name, g := range groups {
		if len(g) > 1 {
			u.log.Warn("upstream prompts normalize to one name: all of them are dropped (MCP-1)", "skill", name)
			continue
		}
		p := g[0]
		sk := Skill{Name: name, RemoteName: p.Name, Description: p.Description, Trust: runtime.TrustExternalUntrusted, up: u}
		for _, a := range p.Arguments {
			if a != nil {
				sk.Arguments = append(sk.Arguments, SkillArgument{Name: a.Name, Description: a.Description, Required: a.Required})
			}
		}
		skills = append(skills, sk)
	}
	sort.Slice(skills, func(i, j int) bool { return skills[i].Name < skills[j].Name })
	u.mu.Lock()
	u.skills = skills
	u.mu.Unlock()
	return nil
}
