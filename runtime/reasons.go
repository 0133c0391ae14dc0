package runtime

import (
	"slices"
	"strings"
)

// reasons_gen.go is generated from reasons.yaml, the checked-in reason table (RT-7).
//go:generate go run ./internal/reasongen

// reasonEntry is one row of the reason table; reasons_gen.go fills [reasonTable] with them.
type reasonEntry struct {
	status    OutcomeStatus
	retryable bool
	message   string
}

// Known reports whether c is in the reason table. A code that is not is a programming
// error: [NewOutcome] turns it into internal_error.
func (c ReasonCode) Known() bool {
	_, ok := reasonTable[c]
	return ok
}

// Status is the outcome status the table gives c, or "" when c is not in the table.
func (c ReasonCode) Status() OutcomeStatus { return reasonTable[c].status }

// Retryable reports whether the table says the identical call, made again later, may
// succeed without duplicating an effect. False for a code not in the table.
func (c ReasonCode) Retryable() bool { return reasonTable[c].retryable }

// Message is the table's fixed message for c, or "" when c is not in the table. It never
// contains text from a call, a tool or a remote system.
func (c ReasonCode) Message() string { return reasonTable[c].message }

// ReasonCodes returns every code in the reason table, sorted.
func ReasonCodes() []ReasonCode {
	codes := make([]ReasonCode, 0, len(reasonTable))
	for c := range reasonTable {
		codes = append(codes, c)
	}
	slices.SortFunc(codes, func(a, b ReasonCode) int { return strings.Compare(string(a), string(b)) })
	return codes
}
