package runtime

import "fmt"

// ToolResult is what a tool returns (RT-1). It has no status field: whether a call
// succeeded, was denied, failed or is uncertain is the pipeline's judgement, never the tool's.
type ToolResult struct {
	OK      bool
	Content []Item
	// Structured is the result as JSON, validated by the pipeline against the output schema.
	Structured []byte
	Artifacts  []ArtifactRef
	Failure    *ToolFailure
	// Trust optionally lowers the spec's output_trust for this result; a value that would
	// raise it is ignored by the pipeline.
	Trust Trust
}

// Item is one piece of content, carrying its own trust label.
type Item struct {
	Type     string // "text" or "json"
	Text     string
	MIMEType string
	Trust    Trust
}

// ArtifactRef names content stored by the artifact writer (RT-9).
type ArtifactRef struct {
	URI       string
	SHA256    string
	Size      int64
	MediaType string
}

// ToolFailure is a failure a tool reports on purpose: a stable code from the tool's
// domain and a message for logs. It is an error, so an implementation can return it
// from Run or Commit; the generated wrapper turns it into a ToolResult with OK false.
// The pipeline maps it to the failed outcome; Message never reaches the model as the
// platform's own words (RT-7).
type ToolFailure struct {
	Code      string
	Message   string
	Retryable bool
}

func (f *ToolFailure) Error() string { return fmt.Sprintf("%s: %s", f.Code, f.Message) }

// Failf builds a ToolFailure with a formatted message.
func Failf(code, format string, a ...any) *ToolFailure {
	return &ToolFailure{Code: code, Message: fmt.Sprintf(format, a...)}
}
