#!/usr/bin/env bash
# make demo: a scripted agent session through the example protocol
# (protocols/plan_implement_review.yaml) on the embedded SQLite store, with the real
# pipeline and real processes: a read, a write, a call denied outside its mode, a mode
# change, a call held for approval and approved by another principal, a call whose
# process is SIGKILLed and that recovery finishes, then the audit log.
set -euo pipefail
cd "$(dirname "$0")/.."
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

go build -o "$work/toolrun" ./cmd/toolrun
spec="$work/spec"   # the spec root: this repository's specs
ws="$work/ws"       # the agent's workspace
mkdir -p "$spec" "$ws/.git"
cp -r tools protocols servers policy.yaml "$spec/"
rm -f "$spec"/tools/*.go
printf '# Demo project\n\nAdd a CHANGELOG entry for release 1.2.\n' > "$ws/README.md"

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
agent() { # the agent's call: session demo, protocol plan_implement_review
	local tool="$1"; shift
	printf '$ toolrun call %s %s\n' "$tool" "$*"
	"$work/toolrun" call --dir "$spec" --workspace "$ws" --session demo \
		--protocol plan_implement_review --hold 200ms --lease 200ms "$tool" "$@" || true
}
operator() {
	printf '$ toolrun %s\n' "$*"
	"$work/toolrun" "$1" --dir "$spec" --workspace "$ws" "${@:2}" || true
}

step "plan: the agent reads the task (a read: one commit, output labelled untrusted)"
agent workspace.read_text '{"path":"README.md"}'

step "plan: it writes its plan"
agent workspace.write_text '{"path":"PLAN.md","text":"1. add the entry\n2. ask for review\n","mode":"overwrite"}'

step "plan: approving its own work is not a plan-mode tool (WF-3), so it is denied"
agent review.approve '{"branch":"feature/changelog","commit":"0123456789abcdef0123456789abcdef01234567","comment":"lgtm"}'

step "plan -> implement: the mode moves only through protocol.dispatch"
agent protocol.dispatch '{"mode":"implement","reason":"the plan is written"}'

step "implement: a write under .git/ needs an approval (approval_when): held, bounded, then approval_pending"
agent workspace.write_text '{"path":".git/CHANGELOG-NOTE","text":"1.2: entry added\n","mode":"overwrite"}'
operator approvals
held="$("$work/toolrun" approvals --dir "$spec" --json | sed -n 's/.*"id": \([0-9]*\).*/\1/p' | head -n1)"
step "a reviewer (another principal: the caller may never approve its own call) approves call $held"
operator approve "$held" --principal reviewer --reason "note checked"
step "implement: the same call, retried, finds the approval and runs once"
agent workspace.write_text '{"path":".git/CHANGELOG-NOTE","text":"1.2: entry added\n","mode":"overwrite"}'

step "implement: the process is SIGKILLed after the effect, before the outcome is recorded"
TOOLRUN_KILL_AT=execute agent workspace.write_text '{"path":"CHANGELOG.md","text":"## 1.2\n- entry added\n","mode":"overwrite"}'
sleep 0.5
step "recovery decides from the recorded facts: the overwrite is idempotent, so it is run again"
operator recover
cat "$ws/CHANGELOG.md"
operator uncertain

step "the audit log: every call and decision, with the mode that was active"
operator audit
