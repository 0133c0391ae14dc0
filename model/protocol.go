package model

// Protocol is one protocols/*.yaml file (SPEC-8, ADR 017) as the run time applies it:
// its modes and the tools each holds. WF-1 and WF-2 were checked at build time, over
// every tool spec and server classification.
type Protocol struct {
	File        string
	Name        string
	InitialMode string
	Modes       []Mode // in declaration order
}

// Mode is one mode of a protocol.
type Mode struct {
	Name string
	// Tools are the tool references the mode declares, as written: tool names and
	// mcp.<server>.* patterns.
	Tools []string
}
