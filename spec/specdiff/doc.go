// Package specdiff compares two loaded spec trees (a previous and a current one) and
// reports, as named findings, the changes a reviewer must see: those that weaken safety,
// those that break callers, and the rest of what changed the generated catalog. It is
// the engine of `toolgen diff`, modelled on buf's `breaking`: stable rule names in
// categories, each finding with its current and previous location. A finding is a
// diag.Annotation, the model `toolgen check` reports with too, and the CLI prints both
// through the same formatters (package spec/diag).
//
// Compare works on the model of package spec, never on the YAML text, so a change of
// comments, key order, quoting or scalar style produces no finding. CEL expressions are
// compared as text with runs of white space collapsed (a folded block scalar and the same
// expression on one line are equal); any other textual change is flagged for review.
//
// # Locations
//
// Every finding names path:line:col in each tree where the thing exists. Current is where the
// changed key is in the current tree, Previous where the same key was in the previous one; a
// key one tree leaves out is located at its fallback there (a tool's name, a server's
// server_id, a protocol's name; a server's classification field at `classification`).
//   - A whole file's subject that is gone (a tool, a server, a protocol) has only Previous;
//     one that is new has only Current.
//   - A part removed from something that still exists (an argument, a scope, an enum
//     value, a mode, a tool of a mode, an exclusive tool, a policy rule, an egress host)
//     has Previous at the removed part and Current at the key that held it, so an annotation
//     lands on the current file.
//   - A part added to something that existed (a new argument, a mode, a tool of a mode, a
//     declared exclusive tool, a policy rule, an egress host) has Current at the new part and
//     Previous at the key that holds its siblings in the previous file.
//
// Findings are sorted by their primary location (Current, else Previous), then rule and message.
//
// # Rules
//
// Severity, subject, what fires it (one rule per row; Rules is the same table in code):
//
//	Rule                             Severity  Subject   Fires when
//	IDEMPOTENCY_LOOSENED             weakens   tool/s/d  idempotency moved toward idempotent (non_idempotent -> conditionally_idempotent -> idempotent)
//	IDEMPOTENT_WHEN_CHANGED          weakens   tool      idempotent_when text changed (review: when is a retry safe)
//	SIDE_EFFECT_LOWERED              weakens   tool/s/d  side_effect lowered (write > read > none)
//	RISK_LOWERED                     weakens   tool/s/d  risk lowered (critical > high > medium > low)
//	SCOPE_REMOVED                    weakens   tool/s/d  a required scope removed
//	OUTPUT_TRUST_RAISED              weakens   tool      output_trust raised (external_untrusted < tool < user < system)
//	APPROVAL_WHEN_REMOVED            weakens   tool      approval_when removed
//	APPROVAL_WHEN_CHANGED            weakens   tool      approval_when text changed (flagged for review)
//	PARALLEL_SAFE_ENABLED            weakens   tool      parallel_safe turned on
//	CONFERS_APPROVAL_DISABLED        weakens   tool      confers_approval turned off
//	MODE_TOOL_ADDED                  weakens   protocol  a tool (or pattern) added to an existing mode; a merged mode shows up here
//	EXCLUSIVE_TOOL_DROPPED           weakens   protocol  a declared exclusive tool no longer declared and no longer in the effective exclusive set (WF-2)
//	SERVER_TO_TENANT                 weakens   server    configured_by operator -> tenant
//	SERVER_TO_STDIO                  weakens   server    transport moved to stdio
//	DEVICE_TOOLS_ALLOWED             weakens   device    allow_tools removed (every listed tool served) or a tool added to it
//	DEVICE_TENANT_CHANGED            weakens   device    tenant moved to another tenant, or removed (another tenant's principals would call the device)
//	POLICY_RULE_REMOVED              weakens   policy    an approve_when or deny_when rule removed
//	POLICY_RULE_CHANGED              weakens   policy    a rule's effect, condition text or tools changed (one finding each)
//	POLICY_ALLOW_RULE_ADDED          weakens   policy    an allow_when rule added (it waives approvals)
//	EGRESS_HOST_ADDED                weakens   policy    a host added to egress.allow
//	BOUND_REMOVED                    weakens   tool      an argument no longer bound (the model supplies it), or bound to another source
//	WORKSPACE_PATH_REMOVED           weakens   tool      an argument no longer workspace_path: checks see the path as written, not as resolved
//	ISSUER_ADDED                     weakens   issuer    an OIDC/JWT issuer added to principals.yaml: its tokens now prove principals
//	ISSUER_TENANTS_WIDENED           weakens   issuer    an issuer may now speak for a tenant it could not (tenant/tenants binding widened)
//	ISSUER_CHANGED                   weakens   issuer    an issuer's iss, audience, keys (jwks_url, key_file), id or tenant claim changed, or an algorithm added;
//	                                                     its console's client_id or redirect_url changed, or its client secret removed (a public client now)
//	CONSOLE_SIGNIN_ADDED             weakens   issuer    an issuer's people may now sign in to the console (issuers[].console added)
//	WEBHOOK_ADDED                    weakens   webhook   a webhook added to notifications.yaml: classifications of held/UNCERTAIN calls now go to it
//	WEBHOOK_DESTINATION_CHANGED      weakens   webhook   a webhook's url or url_env changed: its messages go elsewhere
//	WEBHOOK_TENANTS_WIDENED          weakens   webhook   a webhook told of a tenant it was not, or of every tenant (tenants removed)
//	WEBHOOK_UNSIGNED                 weakens   webhook   a webhook's secret_env removed: its messages are no longer signed
//	CONSOLE_URL_CHANGED              weakens   notifications  console_url changed: the links in messages lead elsewhere
//	TOOL_REMOVED                     breaking  tool      a tool removed (a rename is a removal and an addition)
//	ARG_REMOVED                      breaking  tool      an argument (or nested property) removed
//	ARG_TYPE_CHANGED                 breaking  tool      an argument's type changed
//	ARG_NEWLY_REQUIRED               breaking  tool      an argument that was optional or absent is required
//	ENUM_VALUE_REMOVED               breaking  tool      an enum value removed
//	VERSION_NOT_BUMPED               breaking  tool      a behaviour-affecting field changed and version did not increase
//	ARG_BOUND                        breaking  tool      an argument became bound: callers that send it are refused
//	SERVER_CLASSIFICATION_DEFAULTED  info      srv/dev   a classification field removed: it falls back to the most restrictive value
//	EXCLUSIVE_DECLARATION_DROPPED    info      protocol  a declared exclusive tool no longer declared, but still exclusive (default or confers_approval)
//	TOOL_ADDED                       info      tool      a tool added
//	TOOL_CHANGED                     info      tool      any other change of the tool's catalog entry (description, timeout, result, schema details, ...)
//	ACKNOWLEDGEMENT_STALE            info      tool      an acknowledge entry carried over from the previous tree (see below)
//	SERVER_ADDED                     info      server    a server classification file added
//	SERVER_REMOVED                   info      server    a server classification file removed
//	SERVER_CHANGED                   info      server    any other change of a server (URL, command, configured_by, resources, prompts)
//	DEVICE_ADDED                     info      device    a device file added
//	DEVICE_REMOVED                   info      device    a device file removed
//	DEVICE_CHANGED                   info      device    token_sha256 changed (the token was rotated), or a tenant named where there was none
//	PROTOCOL_ADDED                   info      protocol  a protocol added
//	PROTOCOL_REMOVED                 info      protocol  a protocol removed
//	MODE_ADDED                       info      protocol  a mode added; the message lists the tools it holds, marking the exclusive ones
//	MODE_REMOVED                     info      protocol  a mode removed
//	MODE_TOOL_REMOVED                info      protocol  a tool removed from a mode (it only narrows the mode)
//	PROTOCOL_CHANGED                 info      protocol  initial_mode changed, or an exclusive tool declared (one finding each)
//	POLICY_RULE_ADDED                info      policy    an approve_when or deny_when rule added
//	POLICY_ALLOW_RULE_REMOVED        info      policy    an allow_when rule removed (it only narrows)
//	EGRESS_HOST_REMOVED              info      policy    a host removed from egress.allow
//	ISSUER_REMOVED                   info      issuer    an issuer removed from principals.yaml
//	CONSOLE_SIGNIN_REMOVED           info      issuer    an issuer's console sign-in removed
//	WEBHOOK_REMOVED                  info      webhook   a webhook removed (it is no longer told)
//	WEBHOOK_CHANGED                  info      webhook   a webhook's format, events, secret_env (renamed), max_attempts or timeout changed (one finding each)
//
// The behaviour-affecting fields of VERSION_NOT_BUMPED (the idempotency key includes the
// version, so a recorded result of the old behaviour must not answer a call of the new
// one) are: the argument and result schemas, kind, side_effect, idempotency,
// idempotent_when, suspends and output.max_bytes.
//
// MODE_ADDED is info, not weakens: a new mode gives its actor nothing it had without the
// mode, and the one thing a new mode can break, sharing an exclusive tool with another
// mode (review.approve next to the tools that wrote the change), is WF-1/WF-2, which
// `toolgen check` refuses. Moving tools into an existing mode (a merge) is MODE_TOOL_ADDED.
//
// # Acknowledgements
//
// A tool spec may list rules a reviewer signed off: `acknowledge: [RISK_LOWERED]`. The
// names a tool can list are the weakens and breaking rules about a tool, except
// TOOL_REMOVED ([AcknowledgeableRules]); [CheckAcknowledgements] reports any other name
// at its position, and `toolgen diff` refuses a current tree that has one. The entry is
// review metadata: it is not part of the catalog, the definition hash or the generated
// code, and adding or removing one is not a finding. The rules, per tool T and entry R of
// T's current spec:
//
//   - R is new when the previous tree has no T or T's previous spec does not list R. A
//     new entry marks every finding of rule R on T in this comparison acknowledged
//     (Finding.Acknowledged): still reported, counted apart, and never failing a check.
//     It never applies to another tool's findings, nor to protocol, server or policy
//     findings.
//   - R is carried when T's previous spec lists R too. A carried entry signed off an
//     earlier change, which a reviewer saw; it applies to nothing now, so that a later
//     change of the same kind cannot pass under an old signature. It is reported as
//     ACKNOWLEDGEMENT_STALE (Current at the entry, Previous at the previous entry) when T's
//     version changed, which is how an acknowledgement is cleared on the next version
//     bump, or when a finding of rule R on T fires again in this comparison. Otherwise
//     (same version, nothing of rule R) it is silent.
//
// To acknowledge again a rule whose entry is still carried, remove the entry first (in a
// change of its own), then add it with the new change.
//
// specdiff imports only packages spec, spec/diag and the standard library; it must
// never import codegen, the runtime or the CLI.
package specdiff
