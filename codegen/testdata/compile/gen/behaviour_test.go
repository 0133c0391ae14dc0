package gen

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/toolgen/toolgen/runtime"
)

// recorder is an ExecContext whose watermark writer logs into the same event list as
// the implementations, so the order of Prepare, mark and Commit is observable.
type recorder struct {
	events  []string
	markErr error
}

func (r *recorder) tc() *runtime.ExecContext {
	return runtime.NewExecContext(runtime.ExecContextConfig{
		MarkEffectSent: func(context.Context) error {
			r.events = append(r.events, "mark")
			return r.markErr
		},
	})
}

type writePlan struct{ path string }

type writeImpl struct {
	r          *recorder
	args       WorkspaceWriteTextArgs
	prepareErr error
	commitErr  error
}

func (w *writeImpl) Prepare(ctx context.Context, tc *runtime.ExecContext, args WorkspaceWriteTextArgs) (writePlan, error) {
	if tc.EffectMarked() {
		w.r.events = append(w.r.events, "prepare after mark!")
	}
	w.r.events = append(w.r.events, "prepare")
	w.args = args
	return writePlan{path: args.Path}, w.prepareErr
}

func (w *writeImpl) Commit(ctx context.Context, tc *runtime.ExecContext, plan writePlan) (WorkspaceWriteTextResult, error) {
	if !tc.EffectMarked() {
		w.r.events = append(w.r.events, "commit before mark!")
	}
	w.r.events = append(w.r.events, "commit "+plan.path)
	return WorkspaceWriteTextResult{BytesWritten: 5, Sha256: "ab"}, w.commitErr
}

func TestWatermarkBetweenPrepareAndCommit(t *testing.T) {
	r := &recorder{}
	impl := &writeImpl{r: r}
	tool := NewWorkspaceWriteText(impl)
	res, err := tool.Execute(context.Background(), r.tc(), json.RawMessage(`{"path":"a.txt","text":"hello"}`))
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"prepare", "mark", "commit a.txt"}; !slices.Equal(r.events, want) {
		t.Errorf("events = %v, want %v", r.events, want)
	}
	if !res.OK || string(res.Structured) != `{"bytes_written":5,"sha256":"ab"}` {
		t.Errorf("result = %+v", res)
	}
	if len(res.Content) != 1 || res.Content[0].Trust != runtime.TrustTool {
		t.Errorf("content = %+v, want one item labelled with the spec's output trust", res.Content)
	}
	// Defaults, top-level and nested.
	want := WorkspaceWriteTextArgs{Path: "a.txt", Text: "hello", Mode: WorkspaceWriteTextArgsModeCreate,
		Options: WorkspaceWriteTextArgsOptions{CreateDirs: true, Perm: WorkspaceWriteTextArgsOptionsPerm420}}
	if impl.args != want {
		t.Errorf("args = %+v, want %+v", impl.args, want)
	}
	if tool.Spec() != &WorkspaceWriteTextSpec {
		t.Error("Spec() is not &WorkspaceWriteTextSpec")
	}
}

func TestArgumentsOverrideDefaults(t *testing.T) {
	r := &recorder{}
	impl := &writeImpl{r: r}
	_, err := NewWorkspaceWriteText(impl).Execute(context.Background(), r.tc(),
		json.RawMessage(`{"path":"p","text":"t","mode":"append","options":{"perm":384}}`))
	if err != nil {
		t.Fatal(err)
	}
	// A nested object given in part keeps the defaults of the properties it leaves out.
	want := WorkspaceWriteTextArgsOptions{CreateDirs: true, Perm: WorkspaceWriteTextArgsOptionsPerm384}
	if impl.args.Mode != WorkspaceWriteTextArgsModeAppend || impl.args.Options != want {
		t.Errorf("args = %+v", impl.args)
	}
}

func TestFailures(t *testing.T) {
	ctx := context.Background()
	args := json.RawMessage(`{"path":"a","text":"b"}`)

	// A ToolFailure from Prepare: OK false, no watermark, no Commit.
	r := &recorder{}
	res, err := NewWorkspaceWriteText(&writeImpl{r: r, prepareErr: runtime.Failf("exists", "a exists")}).Execute(ctx, r.tc(), args)
	if err != nil || res.OK || res.Failure == nil || res.Failure.Code != "exists" {
		t.Errorf("prepare failure: res=%+v err=%v", res, err)
	}
	if !slices.Equal(r.events, []string{"prepare"}) {
		t.Errorf("prepare failure: events = %v", r.events)
	}

	// Any other error from Prepare is returned as is.
	r = &recorder{}
	boom := errors.New("boom")
	if _, err := NewWorkspaceWriteText(&writeImpl{r: r, prepareErr: boom}).Execute(ctx, r.tc(), args); !errors.Is(err, boom) {
		t.Errorf("prepare error: err = %v", err)
	}

	// The watermark cannot be recorded: Commit must not run.
	r = &recorder{markErr: errors.New("db down")}
	_, err = NewWorkspaceWriteText(&writeImpl{r: r}).Execute(ctx, r.tc(), args)
	if err == nil || !strings.Contains(err.Error(), "workspace.write_text: record watermark: db down") {
		t.Errorf("mark failure: err = %v", err)
	}
	if !slices.Equal(r.events, []string{"prepare", "mark"}) {
		t.Errorf("mark failure: events = %v", r.events)
	}

	// A ToolFailure from Commit: OK false, but the watermark stays recorded.
	r = &recorder{}
	tc := r.tc()
	res, err = NewWorkspaceWriteText(&writeImpl{r: r, commitErr: runtime.Failf("disk_full", "no space")}).Execute(ctx, tc, args)
	if err != nil || res.OK || res.Failure.Code != "disk_full" || !tc.EffectMarked() {
		t.Errorf("commit failure: res=%+v err=%v marked=%v", res, err, tc.EffectMarked())
	}

	// Arguments that do not decode never reach the implementation.
	r = &recorder{}
	if _, err := NewWorkspaceWriteText(&writeImpl{r: r}).Execute(ctx, r.tc(), json.RawMessage(`{"path":"a","bogus":1}`)); err == nil || len(r.events) != 0 {
		t.Errorf("unknown field: err=%v events=%v", err, r.events)
	}

	defer func() {
		if recover() == nil {
			t.Error("NewWorkspaceWriteText(nil) did not panic")
		}
	}()
	NewWorkspaceWriteText[int](nil)
}

type ticketImpl struct{ args TicketCreateArgs }

func (t *ticketImpl) Prepare(ctx context.Context, tc *runtime.ExecContext, args TicketCreateArgs) (string, error) {
	t.args = args
	return args.Title, nil
}

func (t *ticketImpl) Commit(ctx context.Context, tc *runtime.ExecContext, title string) (TicketCreateResult, error) {
	return TicketCreateResult{Id: "T-1", Url: "https://t/1", Links: []TicketCreateResultLinksItem{
		{Rel: TicketCreateResultLinksItemRelSelf, Href: "https://t/1"},
	}}, nil
}

func TestNonIdempotentDefaults(t *testing.T) {
	impl := &ticketImpl{}
	r := &recorder{}
	res, err := NewTicketCreate(impl).Execute(context.Background(), r.tc(), json.RawMessage(`{"title":"x","assignee":{"id":"ann"}}`))
	if err != nil || !res.OK {
		t.Fatalf("res=%+v err=%v", res, err)
	}
	a := impl.args
	if a.Priority != TicketCreateArgsPriority2 || !slices.Equal(a.Labels, []TicketCreateArgsLabelsItem{TicketCreateArgsLabelsItemNeedsTriage}) ||
		a.Estimate != 0.5 || a.Assignee != (TicketCreateArgsAssignee{Id: "ann", Notify: true}) || a.Watchers != nil {
		t.Errorf("args = %+v", a)
	}
	if !slices.Equal(r.events, []string{"mark"}) {
		t.Errorf("events = %v", r.events)
	}
	if string(res.Structured) != `{"id":"T-1","url":"https://t/1","links":[{"rel":"self","href":"https://t/1"}]}` {
		t.Errorf("structured = %s", res.Structured)
	}
}

type readImpl struct{ args WorkspaceReadTextArgs }

func (r *readImpl) Run(ctx context.Context, tc *runtime.ExecContext, args WorkspaceReadTextArgs) (WorkspaceReadTextResult, error) {
	r.args = args
	return WorkspaceReadTextResult{Text: "hi"}, nil
}

func TestIdempotentRunsWithoutWatermark(t *testing.T) {
	impl := &readImpl{}
	r := &recorder{}
	tc := r.tc()
	res, err := NewWorkspaceReadText(impl).Execute(context.Background(), tc, nil)
	if err != nil || !res.OK || string(res.Structured) != `{"text":"hi","truncated":false}` {
		t.Fatalf("res=%+v (%s) err=%v", res, res.Structured, err)
	}
	if tc.EffectMarked() || len(r.events) != 0 {
		t.Error("an idempotent tool recorded a watermark")
	}
	if impl.args.MaxBytes != 65536 || impl.args.Encoding != WorkspaceReadTextArgsEncodingUtf8 {
		t.Errorf("args = %+v", impl.args)
	}
}

type askImpl struct{}

func (askImpl) Run(ctx context.Context, tc *runtime.ExecContext, args ConversationAskUserArgs) (ConversationAskUserResult, error) {
	tc.Suspend("waiting for: " + args.Question)
	return ConversationAskUserResult{}, nil
}

func TestControlTool(t *testing.T) {
	r := &recorder{}
	tc := r.tc()
	if _, err := NewConversationAskUser(askImpl{}).Execute(context.Background(), tc, json.RawMessage(`{"question":"ok?"}`)); err != nil {
		t.Fatal(err)
	}
	if why, ok := tc.SuspendRequested(); !ok || why != "waiting for: ok?" {
		t.Errorf("suspend = %q %v", why, ok)
	}
	if s := ConversationAskUserSpec; s.Kind != runtime.KindControl || !s.Suspends || s.Idempotency != runtime.Idempotent {
		t.Errorf("spec = %+v", s)
	}
}

func TestSpecs(t *testing.T) {
	specs := Specs()
	var names []string
	for _, s := range specs {
		names = append(names, s.Name)
		var in, out map[string]any
		if json.Unmarshal(s.InputSchema, &in) != nil || json.Unmarshal(s.OutputSchema, &out) != nil || in["type"] != "object" {
			t.Errorf("%s: schemas do not parse", s.Name)
		}
		if len(s.SchemaSHA256) != 64 || !strings.HasPrefix(s.Source, "tools/") {
			t.Errorf("%s: SchemaSHA256 %q, Source %q", s.Name, s.SchemaSHA256, s.Source)
		}
	}
	if !slices.IsSorted(names) || len(names) != 4 {
		t.Errorf("Specs() names = %v", names)
	}
	if specs[1] != &TicketCreateSpec {
		t.Error("Specs() does not point at the Spec variables")
	}
	w := WorkspaceWriteTextSpec
	if w.Timeout.String() != "30s" || w.IdempotentWhen != "args.mode == 'overwrite'" || !w.Idempotency.NeedsWatermark() ||
		!slices.Equal(w.RequiredScopes, []string{"workspace.write"}) || w.OutputMaxBytes != 65536 {
		t.Errorf("WorkspaceWriteTextSpec = %+v", w)
	}
	if TicketCreateSpec.Timeout.String() != "1.5s" || WorkspaceReadTextSpec.OutputTrust != runtime.TrustExternalUntrusted {
		t.Error("classification fields not generated as specified")
	}
}
