// Package specdiff compares two loaded spec trees (a previous and a current one) and
// reports, as named findings, the changes a reviewer must see: those that weaken safety,
// those that break callers, and the rest of what changed the generated catalog. It is
// the engine of `toolgen diff`, modelled on buf's `breaking`: stable rule names in
// categories, each finding with its current and previous location.
//
// Compare works on the model of package spec, never on the YAML text, so a change of
// comments, key order, quoting or scalar style produces no finding. CEL expressions are
// compared as text with runs of white space collapsed (a folded block scalar and the same
// expression on one line are equal); any other textual change is flagged for review.
//
// Locations: Cur is where the changed key is in the current tree, Prev where the same
// key was in the previous one. A thing that is gone (a tool, a policy rule) has only Prev;
// a thing that is new has only Cur. A part removed from something that still exists (an
// argument, a scope, an enum value, an exclusive tool) has Prev at the removed part and
// Cur at the key that held it, so an annotation lands on the current file.
//
// Rules (severity, subject, what fires it):
//
//	Rule                             Severity  Subject   Fires when
//	IDEMPOTENCY_LOOSENED             weakens   tool/srv  idempotency moved toward idempotent (non_idempotent -> conditionally_idempotent -> idempotent)
//	IDEMPOTENT_WHEN_CHANGED          weakens   tool      idempotent_when text changed (review: when is a retry safe)
//	SIDE_EFFECT_LOWERED              weakens   tool/srv  side_effect lowered (write > read > none)
//	RISK_LOWERED                     weakens   tool/srv  risk lowered (critical > high > medium > low)
//	SCOPE_REMOVED                    weakens   tool/srv  a required scope removed
//	OUTPUT_TRUST_RAISED              weakens   tool      output_trust raised (external_untrusted < tool < user < system)
//	APPROVAL_WHEN_REMOVED            weakens   tool      approval_when removed
//	APPROVAL_WHEN_CHANGED            weakens   tool      approval_when text changed (flagged for review)
//	PARALLEL_SAFE_ENABLED            weakens   tool      parallel_safe turned on
//	CONFERS_APPROVAL_DISABLED        weakens   tool      confers_approval turned off
//	MODE_TOOL_ADDED                  weakens   protocol  a tool (or pattern) added to an existing mode; a merged mode shows up here
//	EXCLUSIVE_TOOL_DROPPED           weakens   protocol  a declared exclusive tool no longer declared and no longer in the effective exclusive set (WF-2)
//	SERVER_TO_TENANT                 weakens   server    configured_by operator -> tenant
//	SERVER_TO_STDIO                  weakens   server    transport moved to stdio
//	POLICY_RULE_REMOVED              weakens   policy    an approve_when or deny_when rule removed
//	POLICY_RULE_CHANGED              weakens   policy    a rule's condition text, effect or tools changed
//	POLICY_ALLOW_RULE_ADDED          weakens   policy    an allow_when rule added (it waives approvals)
//	EGRESS_HOST_ADDED                weakens   policy    a host added to egress.allow
//	TOOL_REMOVED                     breaking  tool      a tool removed (a rename is a removal and an addition)
//	ARG_REMOVED                      breaking  tool      an argument (or nested property) removed
//	ARG_TYPE_CHANGED                 breaking  tool      an argument's type changed
//	ARG_NEWLY_REQUIRED               breaking  tool      an argument that was optional or absent is required
//	ENUM_VALUE_REMOVED               breaking  tool      an enum value removed
//	VERSION_NOT_BUMPED               breaking  tool      a behaviour-affecting field changed and version did not increase
//	SERVER_CLASSIFICATION_DEFAULTED  info      server    a classification field removed: it falls back to the most restrictive value
//	EXCLUSIVE_DECLARATION_DROPPED    info      protocol  a declared exclusive tool no longer declared, but still exclusive (default or confers_approval)
//	TOOL_ADDED                       info      tool      a tool added
//	TOOL_CHANGED                     info      tool      any other change of the tool's catalog entry (description, timeout, result, schema details, ...)
//	SERVER_ADDED, SERVER_REMOVED     info      server    a server classification file added or removed
//	SERVER_CHANGED                   info      server    any other change of a server (URL, command, resources, prompts)
//	PROTOCOL_ADDED, PROTOCOL_REMOVED info      protocol  a protocol added or removed
//	MODE_ADDED, MODE_REMOVED         info      protocol  a mode added or removed
//	MODE_TOOL_REMOVED                info      protocol  a tool removed from a mode (it only narrows the mode)
//	PROTOCOL_CHANGED                 info      protocol  initial_mode changed, or an exclusive tool declared
//	POLICY_RULE_ADDED                info      policy    an approve_when or deny_when rule added
//	POLICY_ALLOW_RULE_REMOVED        info      policy    an allow_when rule removed (it only narrows)
//	EGRESS_HOST_REMOVED              info      policy    a host removed from egress.allow
//
// The behaviour-affecting fields of VERSION_NOT_BUMPED (the idempotency key includes the
// version, so a recorded result of the old behaviour must not answer a call of the new
// one) are: the argument and result schemas, kind, side_effect, idempotency,
// idempotent_when, suspends and output.max_bytes.
//
// specdiff imports only package spec and the standard library; it must never import
// codegen, the runtime or the CLI.
package specdiff
