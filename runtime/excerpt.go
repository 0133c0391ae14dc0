package runtime

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// Large output (RT-9, ADR-0021 decision 12) is excerpted head-and-tail and the full text is
// written to an artifact. It is never summarized: an excerpt is the input's own bytes, a
// prefix and a suffix, joined by a marker the platform writes.
//
// Excerpting works on raw item text. The pipeline must envelope ([Envelope]) after
// excerpting, never before, so that an excerpt can never cut a trust envelope; the marker
// then sits inside the envelope with the text it annotates.

// ExcerptMarkerFormat is the elision marker [Excerpt] puts between head and tail; %d is the
// number of bytes left out.
const ExcerptMarkerFormat = "\n[... %d bytes elided; full output in artifact ...]\n"

// excerptShortMarker replaces the marker when the budget cannot hold it.
const excerptShortMarker = "\n[...]\n"

// Excerpt returns text when it fits in maxBytes. Otherwise it returns a head and a tail of
// text joined by an elision marker (see [ExcerptMarkerFormat]) and elided is true.
//
// The head gets half of what the marker leaves of the budget, the tail the rest. Both are
// cut on rune boundaries (a cut backs off to the start of the rune it would split), so an
// excerpt of valid UTF-8 is valid UTF-8. The result is never longer than maxBytes: when
// the marker does not fit, a short marker "\n[...]\n" is used, and when that does not fit
// either, the result is a head alone. A negative maxBytes counts as 0.
func Excerpt(text string, maxBytes int) (out string, elided bool) {
	return excerpt(text, maxBytes, ExcerptMarkerFormat)
}

// excerpt is Excerpt with a marker format holding one %d, the number of bytes elided.
func excerpt(text string, maxBytes int, markerFormat string) (string, bool) {
	maxBytes = max(maxBytes, 0)
	if len(text) <= maxBytes {
		return text, false
	}
	if maxBytes == 0 {
		return "", true
	}
	// The marker's length depends on the count it prints, which depends on how much the
	// marker leaves: size it for the largest possible count (the whole text), then print
	// the real one, which has no more digits.
	longest := len(fmt.Sprintf(markerFormat, len(text)))
	if longest <= maxBytes {
		head, tail := split(text, maxBytes-longest)
		marker := fmt.Sprintf(markerFormat, len(text)-len(head)-len(tail))
		return head + marker + tail, true
	}
	if len(excerptShortMarker) <= maxBytes {
		head, tail := split(text, maxBytes-len(excerptShortMarker))
		return head + excerptShortMarker + tail, true
	}
	return text[:runeStartBefore(text, maxBytes)], true
}

// split cuts a head and a tail of text totalling at most budget bytes, on rune boundaries.
func split(text string, budget int) (head, tail string) {
	h := runeStartBefore(text, budget/2)
	t := runeStartAfter(text, len(text)-(budget-budget/2))
	return text[:h], text[t:]
}

// runeStartBefore returns the largest i <= n that does not split a UTF-8 sequence in text
// (n itself when text[n] starts a rune). In invalid UTF-8 it backs off at most
// utf8.UTFMax-1 bytes and otherwise cuts at n.
func runeStartBefore(text string, n int) int {
	if n >= len(text) {
		return len(text)
	}
	for i := n; i > n-utf8.UTFMax; i-- {
		if i <= 0 {
			return 0
		}
		if utf8.RuneStart(text[i]) {
			return i
		}
	}
	return n
}

// runeStartAfter returns the smallest i >= n that does not split a UTF-8 sequence in text:
// n itself, unless a valid sequence starting before n covers it, and then the end of
// that sequence. (Looking only for the next rune-start byte is not enough in invalid
// UTF-8: after a valid sequence, stray continuation bytes may follow, and cutting at n
// would then split the sequence.)
func runeStartAfter(text string, n int) int {
	if n <= 0 {
		return 0
	}
	if n >= len(text) {
		return len(text)
	}
	for i := n; i >= 0 && i > n-utf8.UTFMax; i-- {
		if utf8.RuneStart(text[i]) {
			if _, size := utf8.DecodeRuneInString(text[i:]); i+size > n && i < n {
				return i + size
			}
			return n
		}
	}
	return n
}

// DefaultArtifactMediaType is the media type of a content artifact when the caller names none.
const DefaultArtifactMediaType = "text/plain; charset=utf-8"

// ArtifactItemSeparatorFormat starts each item in a content artifact of several items;
// the numbers are the 1-based index and the count.
const ArtifactItemSeparatorFormat = "----- item %d of %d -----\n"

// ExcerptResult enforces a result's output budget (RT-9). When the result's inline size —
// the bytes of every item's text plus the structured JSON — is at most maxBytes (or
// maxBytes <= 0, no budget), r is returned as it is. Otherwise:
//
//   - The full content is written to w as one artifact: a single item's text verbatim,
//     with the item's MIMEType when it has one; or, for several items, each text preceded
//     by an [ArtifactItemSeparatorFormat] line and followed by "\n". mediaType
//     (DefaultArtifactMediaType when empty) is the media type otherwise.
//   - Structured, when present, is written to w as its own artifact (application/json) and
//     dropped from the inline result: an excerpt of JSON is not JSON, and a structured
//     value must validate against the output schema or be absent. (When the content
//     artifact has the same bytes, content addressing makes it one artifact, one ref.)
//   - If the items' texts alone still exceed maxBytes, each text is replaced by its
//     [Excerpt]. The budget is split max-min fairly: an item shorter than its fair share
//     keeps all of it and the rest is shared equally by the longer items, so a short item
//     is never erased by a long neighbour. An excerpted item keeps its trust label; its
//     Type becomes "text" and its MIMEType "text/plain; charset=utf-8", since a cut JSON
//     or other document is no longer one.
//   - The new artifacts are appended to Artifacts.
//
// Without an artifact writer an over-budget result is an error: the full output is never
// discarded. Item texts must not be enveloped yet (see [Envelope]).
func ExcerptResult(ctx context.Context, r ToolResult, maxBytes int, w ArtifactWriter, mediaType string) (ToolResult, error) {
	textBytes := 0
	for _, it := range r.Content {
		textBytes += len(it.Text)
	}
	if maxBytes <= 0 || textBytes+len(r.Structured) <= maxBytes {
		return r, nil
	}
	if w == nil {
		return r, errors.New("runtime: excerpt result: output exceeds its budget and there is no artifact writer")
	}
	if mediaType == "" {
		mediaType = DefaultArtifactMediaType
	}
	out := r
	out.Content = slices.Clone(r.Content)
	out.Artifacts = slices.Clone(r.Artifacts)
	addRef := func(ref ArtifactRef) {
		for _, have := range out.Artifacts {
			if have.SHA256 == ref.SHA256 && have.MediaType == ref.MediaType {
				return
			}
		}
		out.Artifacts = append(out.Artifacts, ref)
	}

	if len(r.Structured) > 0 {
		ref, err := w.WriteArtifact(ctx, "application/json", bytes.NewReader(r.Structured))
		if err != nil {
			return r, fmt.Errorf("runtime: excerpt result: write structured artifact: %w", err)
		}
		addRef(ref)
		out.Structured = nil
	}
	if textBytes <= maxBytes {
		return out, nil
	}

	if len(r.Content) == 1 && r.Content[0].MIMEType != "" {
		mediaType = r.Content[0].MIMEType
	}
	ref, err := w.WriteArtifact(ctx, mediaType, strings.NewReader(contentArtifact(r.Content)))
	if err != nil {
		return r, fmt.Errorf("runtime: excerpt result: write content artifact: %w", err)
	}
	addRef(ref)
	lens := make([]int, len(r.Content))
	for i, it := range r.Content {
		lens[i] = len(it.Text)
	}
	for i, share := range fairShares(lens, maxBytes) {
		text, elided := Excerpt(out.Content[i].Text, share)
		if elided {
			out.Content[i].Text = text
			out.Content[i].Type = "text"
			out.Content[i].MIMEType = "text/plain; charset=utf-8"
		}
	}
	return out, nil
}

// contentArtifact is the full content of a result as one artifact.
func contentArtifact(items []Item) string {
	if len(items) == 1 {
		return items[0].Text
	}
	var b strings.Builder
	for i, it := range items {
		fmt.Fprintf(&b, ArtifactItemSeparatorFormat, i+1, len(items))
		b.WriteString(it.Text)
		b.WriteByte('\n')
	}
	return b.String()
}

// fairShares splits budget over items of the given sizes max-min fairly: items are served
// smallest first, each taking its size or an equal share of what is left, whichever is
// smaller. The shares never sum to more than budget.
func fairShares(sizes []int, budget int) []int {
	order := make([]int, len(sizes))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return sizes[a] - sizes[b] })
	shares := make([]int, len(sizes))
	left := budget
	for k, i := range order {
		fair := left / (len(order) - k)
		shares[i] = min(sizes[i], fair)
		left -= shares[i]
	}
	return shares
}
