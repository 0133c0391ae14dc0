package model

// Tree is a checked spec root as the run time sees it: what spec produces of a
// spec.Tree (spec.Tree.Model). The tools are not here: their run-time form is the
// generated runtime.ToolSpec.
type Tree struct {
	Servers   []*Server   // sorted by server_id
	Protocols []*Protocol // sorted by name
	Devices   []*Device   // sorted by device_id
	// EgressAllow are policy.yaml's egress.allow host patterns ([HostAllowed]); nil
	// without a policy.
	EgressAllow []string
	// Principals is principals.yaml, nil when absent (ID-1).
	Principals *Principals
	// Notifications is notifications.yaml, nil when absent (UI-1).
	Notifications *Notifications
}

// Protocol returns the protocol named name, or nil.
func (t *Tree) Protocol(name string) *Protocol {
	for _, p := range t.Protocols {
		if p.Name == name {
			return p
		}
	}
	return nil
}
