package spec

import (
	"slices"
	"strings"
)

// CheckRule is one row of the table of check rules: what `toolgen check` (and
// `toolgen generate`, which checks first) can report.
type CheckRule struct {
	// ID is the rule's stable name, REQUIREMENT.check: the requirement of DESIGN.md it
	// enforces (SPEC-4, ID-1, ...) or a structural group (yaml, schema, acknowledge,
	// builtin), a dot, and the check. WF-1 and WF-2 are each exactly one check and keep
	// their bare requirement ID, which the run-time protocol loader also matches.
	ID string
	// Summary says what fires it.
	Summary string
	// Internal, when set, says why no spec file can fire the rule (a failure of
	// toolgen itself or of its embedded files); such a rule has no testscript.
	Internal string
}

// Category is the group of the rule: its ID up to the first dot.
func (r CheckRule) Category() string { return ruleCategory(r.ID) }

func ruleCategory(id string) string {
	c, _, _ := strings.Cut(id, ".")
	return c
}

// CheckRuleScript is the testscript of a check rule: check_rule_<id>.txtar, the ID
// lower-cased with its dots and dashes as underscores.
func CheckRuleScript(id string) string {
	return "check_rule_" + strings.NewReplacer(".", "_", "-", "_").Replace(strings.ToLower(id)) + ".txtar"
}

// LookupCheckRule returns the check rule with the given ID.
func LookupCheckRule(id string) (CheckRule, bool) {
	i := slices.IndexFunc(CheckRules, func(r CheckRule) bool { return r.ID == id })
	if i < 0 {
		return CheckRule{}, false
	}
	return CheckRules[i], true
}

// CheckRules is the table of check rules, by category. An ID never changes once
// released: CI configurations and documentation (docs/rules.md, generated from this
// table and checked by a test) name it. Every rule that a spec can fire has a
// testscript, testscripts/testdata/script/check_rule_<id>.txtar, with a spec that fires it and the fixed
// spec that does not.
var CheckRules = []CheckRule{
	// yaml: a file that cannot be read as one YAML document of plain data.
	{ID: "yaml.syntax", Summary: "the YAML parser rejects the file"},
	{ID: "yaml.parser-failed", Summary: "the YAML parser panicked on the file", Internal: "a parser bug, not a spec mistake"},
	{ID: "yaml.empty-file", Summary: "the file holds no YAML document"},
	{ID: "yaml.multiple-documents", Summary: "the file holds more than one YAML document"},
	{ID: "yaml.utf16", Summary: "the file is UTF-16, not UTF-8"},
	{ID: "yaml.line-separator", Summary: "a character YAML reads as a line break but editors do not (NEL, LS, PS)"},
	{ID: "yaml.alias", Summary: "a YAML alias (*name)"},
	{ID: "yaml.anchor", Summary: "a YAML anchor (&name)"},
	{ID: "yaml.merge-key", Summary: "a YAML merge key (<<)"},
	{ID: "yaml.custom-tag", Summary: "a custom YAML tag (!tag)"},

	// schema: the shape every file kind shares (keys, scalar types), SPEC-9's schemas.
	{ID: "schema.yml-extension", Summary: "a spec file ends in .yml and would not be checked"},
	{ID: "schema.not-a-mapping", Summary: "a mapping was expected (the top level, a field, a section)"},
	{ID: "schema.not-a-list", Summary: "a list was expected (rules, webhooks, principals, issuers)"},
	{ID: "schema.key-not-string", Summary: "a mapping key is not a string"},
	{ID: "schema.duplicate-key", Summary: "a key appears twice in one mapping"},
	{ID: "schema.unknown-key", Summary: "a key the file kind does not define (with a did-you-mean)"},
	{ID: "schema.missing-key", Summary: "a required key is missing (version, risk, name, ...)"},
	{ID: "schema.not-a-string", Summary: "a string was expected"},
	{ID: "schema.empty-string", Summary: "a required string is empty"},
	{ID: "schema.not-a-bool", Summary: "true or false was expected"},
	{ID: "schema.not-an-integer", Summary: "an integer was expected"},
	{ID: "schema.not-a-number", Summary: "a number was expected"},
	{ID: "schema.not-a-string-list", Summary: "a list of strings was expected"},
	{ID: "schema.list-entry-not-string", Summary: "an entry of a list of strings is not a string"},
	{ID: "schema.value-not-allowed", Summary: "kind, risk or output_trust is not one of its values"},
	{ID: "schema.version-positive", Summary: "a tool's version is not a positive integer"},
	{ID: "schema.scope-grammar", Summary: "a tool's required scope does not match the scope grammar"},
	{ID: "schema.scope-duplicate", Summary: "a tool lists a required scope twice"},
	{ID: "schema.duration", Summary: "a timeout is not a duration such as 30s"},
	{ID: "schema.timeout-range", Summary: "a tool's timeout is not more than 0 and at most the maximum"},
	{ID: "schema.max-bytes-range", Summary: "output.max_bytes is outside 1024 .. 1 GiB"},

	// acknowledge: a tool's sign-offs of toolgen diff rules.
	{ID: "acknowledge.grammar", Summary: "an acknowledge entry is not a diff rule name (UPPER_SNAKE_CASE)"},
	{ID: "acknowledge.duplicate", Summary: "an acknowledge entry is listed twice"},
	{ID: "acknowledge.unknown-rule", Summary: "an acknowledge entry names no diff rule a tool can acknowledge (specdiff)"},

	{ID: "builtin.unreadable", Summary: "the embedded builtin specs cannot be read", Internal: "the builtin specs are embedded in the binary"},

	// SPEC-1: tool names and the Go identifiers derived from them.
	{ID: "SPEC-1.name-grammar", Summary: "a tool name breaks the name grammar (segments, characters, length)"},
	{ID: "SPEC-1.file-name", Summary: "a tool spec's file is not named after the tool"},
	{ID: "SPEC-1.duplicate-tool", Summary: "two spec files declare the same tool"},
	{ID: "SPEC-1.go-field-collision", Summary: "two fields of one tool become the same Go field"},
	{ID: "SPEC-1.go-ident-collision", Summary: "two tools generate the same Go identifiers"},

	// SPEC-2: reserved domains.
	{ID: "SPEC-2.reserved-domain", Summary: "a builtin tool is named in a domain reserved for adapters (mcp, device, sandbox)"},

	// SPEC-3: idempotency declarations.
	{ID: "SPEC-3.side-effect-missing", Summary: "a tool spec has no side_effect"},
	{ID: "SPEC-3.value-not-allowed", Summary: "side_effect or idempotency is not one of its values"},
	{ID: "SPEC-3.none-implies-idempotent", Summary: "side_effect none with an idempotency other than idempotent (tool or server)"},
	{ID: "SPEC-3.idempotency-missing", Summary: "side_effect read or write without idempotency"},
	{ID: "SPEC-3.idempotent-when-missing", Summary: "conditionally_idempotent without idempotent_when"},
	{ID: "SPEC-3.idempotent-when-not-allowed", Summary: "idempotent_when without conditionally_idempotent"},
	{ID: "SPEC-3.parallel-safe-write", Summary: "parallel_safe on a tool with side_effect write"},
	{ID: "SPEC-3.suspends-missing", Summary: "a control tool does not declare suspends"},
	{ID: "SPEC-3.suspends-not-allowed", Summary: "suspends on a tool that is not kind: control"},

	// SPEC-4: argument and result types.
	{ID: "SPEC-4.field-name", Summary: "a field name is not lower_snake_case"},
	{ID: "SPEC-4.too-deep", Summary: "fields nested deeper than the limit"},
	{ID: "SPEC-4.unknown-type", Summary: "a field's type is not one of the types"},
	{ID: "SPEC-4.keyword-not-allowed", Summary: "a keyword that does not apply to the field's type (max_length on an integer, ...)"},
	{ID: "SPEC-4.negative", Summary: "a length or count bound is negative"},
	{ID: "SPEC-4.non-finite", Summary: "a number is an infinity or NaN"},
	{ID: "SPEC-4.max-below-min", Summary: "max below min"},
	{ID: "SPEC-4.max-length-below-min-length", Summary: "max_length below min_length"},
	{ID: "SPEC-4.max-items-below-min-items", Summary: "max_items below min_items"},
	{ID: "SPEC-4.invalid-pattern", Summary: "a pattern is not a valid regular expression"},
	{ID: "SPEC-4.items-missing", Summary: "an array without items"},
	{ID: "SPEC-4.properties-missing", Summary: "an object without properties"},
	{ID: "SPEC-4.properties-empty", Summary: "an object with no property"},
	{ID: "SPEC-4.enum-empty", Summary: "an enum that is not a non-empty list"},
	{ID: "SPEC-4.enum-duplicate", Summary: "an enum lists a value twice"},
	{ID: "SPEC-4.required-with-default", Summary: "a field both required and with a default"},
	{ID: "SPEC-4.bound-nested", Summary: "bound on a field that is not a top-level argument"},
	{ID: "SPEC-4.bound-source", Summary: "bound names an unknown source"},
	{ID: "SPEC-4.bound-type", Summary: "a bound argument that is not a string"},
	{ID: "SPEC-4.bound-default-or-required", Summary: "a bound argument with a default or required"},
	{ID: "SPEC-4.workspace-path-nested", Summary: "workspace_path on a field that is not a top-level argument"},
	{ID: "SPEC-4.workspace-path-type", Summary: "a workspace path that is not a string"},
	{ID: "SPEC-4.workspace-path-bound", Summary: "an argument both bound and a workspace path"},
	{ID: "SPEC-4.value-type", Summary: "a default or enum value is not of the field's type"},
	{ID: "SPEC-4.value-too-long", Summary: "a default or enum value is longer than max_length"},
	{ID: "SPEC-4.value-too-short", Summary: "a default or enum value is shorter than min_length"},
	{ID: "SPEC-4.value-pattern", Summary: "a default or enum value does not match pattern"},
	{ID: "SPEC-4.value-not-in-enum", Summary: "a default is not one of the enum values"},
	{ID: "SPEC-4.value-out-of-range", Summary: "a default or enum value is outside min/max"},
	{ID: "SPEC-4.value-items-count", Summary: "a default list has a number of items outside min_items/max_items"},
	{ID: "SPEC-4.value-missing-property", Summary: "a default object lacks a required property"},

	// SPEC-5: CEL in tool specs (idempotent_when, approval_when).
	{ID: "SPEC-5.empty-expression", Summary: "an empty CEL expression"},
	{ID: "SPEC-5.cel-error", Summary: "a CEL parse or type error (misspelt field, type mismatch), at its line and column"},
	{ID: "SPEC-5.cel-not-bool", Summary: "a CEL expression whose type is not bool"},
	{ID: "SPEC-5.cel-cost-budget", Summary: "a CEL expression whose estimated cost exceeds the budget"},
	{ID: "SPEC-5.cel-cost-unknown", Summary: "the cost of a CEL expression cannot be estimated", Internal: "the estimator fails only on an internal error"},
	{ID: "SPEC-5.cel-checker-failed", Summary: "the CEL checker panicked on an expression", Internal: "a cel-go bug, not a spec mistake"},
	{ID: "SPEC-5.cel-environment", Summary: "the CEL environment of a tool's arguments cannot be built", Internal: "every checked argument type has a CEL type"},

	// SPEC-7: server classification files.
	{ID: "SPEC-7.server-id", Summary: "server_id is not one lower_snake_case segment"},
	{ID: "SPEC-7.file-name", Summary: "a server file is not named after its server_id"},
	{ID: "SPEC-7.missing-key", Summary: "a server file lacks configured_by or transport"},
	{ID: "SPEC-7.value-not-allowed", Summary: "configured_by, resources, prompts or a classification field is not one of its values"},
	{ID: "SPEC-7.operator-tenant", Summary: "tenant on an operator-configured server"},
	{ID: "SPEC-7.tenant-name", Summary: "a server's tenant breaks the tenant grammar"},
	{ID: "SPEC-7.tenant-missing", Summary: "a tenant-configured server names no tenant"},
	{ID: "SPEC-7.transport-both", Summary: "a transport with both http and stdio"},
	{ID: "SPEC-7.transport-none", Summary: "a transport with neither http nor stdio"},
	{ID: "SPEC-7.url", Summary: "a server url that is not an absolute http(s) URL"},
	{ID: "SPEC-7.tenant-https", Summary: "a tenant-configured server over plain http"},
	{ID: "SPEC-7.tenant-stdio", Summary: "a tenant-configured server over stdio"},
	{ID: "SPEC-7.egress-not-allowed", Summary: "a tenant server's host is not in policy.yaml egress.allow"},
	{ID: "SPEC-7.scope-grammar", Summary: "a classification scope breaks the scope grammar"},
	{ID: "SPEC-7.scope-reserved", Summary: "a classification names the scope reserved for unclassified servers"},

	// SPEC-8: protocol files.
	{ID: "SPEC-8.protocol-name", Summary: "a protocol name is not lower_snake_case"},
	{ID: "SPEC-8.file-name", Summary: "a protocol file is not named after the protocol"},
	{ID: "SPEC-8.duplicate-protocol", Summary: "two files declare the same protocol"},
	{ID: "SPEC-8.missing-key", Summary: "a protocol lacks modes or initial_mode, or a mode lacks tools"},
	{ID: "SPEC-8.modes-empty", Summary: "a protocol with no mode"},
	{ID: "SPEC-8.mode-name", Summary: "a mode name is not lower_snake_case"},
	{ID: "SPEC-8.mode-tool-duplicate", Summary: "a mode lists a tool twice"},
	{ID: "SPEC-8.initial-mode-unknown", Summary: "initial_mode is not one of the protocol's modes"},
	{ID: "SPEC-8.exclusive-duplicate", Summary: "exclusive_tools lists a tool twice"},
	{ID: "SPEC-8.exclusive-pattern", Summary: "exclusive_tools names a pattern (mcp.server.*)"},
	{ID: "SPEC-8.unknown-tool", Summary: "a mode or exclusive_tools names a tool that does not exist"},

	// WF: ADR 017's exclusive tools.
	{ID: "WF-1", Summary: "a tool declared in exclusive_tools is held by more than one mode"},
	{ID: "WF-2", Summary: "a default exclusive tool (review.approve, review.merge, confers_approval) is held by more than one mode"},

	// POL-2: policy.yaml.
	{ID: "POL-2.egress-host", Summary: "an egress.allow host is not a lower-case host name (or *.domain)"},
	{ID: "POL-2.rule-name", Summary: "a rule name is not lower-case words joined by - or _"},
	{ID: "POL-2.rule-name-duplicate", Summary: "two rules share a name"},
	{ID: "POL-2.tools-empty", Summary: "a rule's tools is an empty list"},
	{ID: "POL-2.rule-condition-count", Summary: "a rule without exactly one of approve_when, deny_when, allow_when"},
	{ID: "POL-2.unknown-tool", Summary: "a rule names a tool that does not exist"},
	{ID: "POL-2.empty-expression", Summary: "an empty rule condition"},
	{ID: "POL-2.cel-error", Summary: "a CEL parse or type error in a rule condition"},
	{ID: "POL-2.cel-not-bool", Summary: "a rule condition whose type is not bool"},
	{ID: "POL-2.cel-cost-budget", Summary: "a rule condition whose estimated cost exceeds the budget"},
	{ID: "POL-2.cel-cost-unknown", Summary: "the cost of a rule condition cannot be estimated", Internal: "the estimator fails only on an internal error"},
	{ID: "POL-2.cel-checker-failed", Summary: "the CEL checker panicked on a rule condition", Internal: "a cel-go bug, not a spec mistake"},
	{ID: "POL-2.cel-environment", Summary: "the CEL environment of a rule cannot be built", Internal: "every checked argument type has a CEL type"},

	// DEV-2: device files.
	{ID: "DEV-2.device-id", Summary: "device_id is not one lower_snake_case segment"},
	{ID: "DEV-2.device-id-too-long", Summary: "device.<device_id>.NAME cannot fit the name length"},
	{ID: "DEV-2.file-name", Summary: "a device file is not named after its device_id"},
	{ID: "DEV-2.token-in-file", Summary: "a device file holds the token itself"},
	{ID: "DEV-2.token-sha256", Summary: "token_sha256 is not 64 lower-case hex digits"},
	{ID: "DEV-2.tenant-missing", Summary: "a device names no tenant"},
	{ID: "DEV-2.tenant-name", Summary: "a device's tenant breaks the tenant grammar"},
	{ID: "DEV-2.allow-tools-empty-entry", Summary: "an empty allow_tools entry"},
	{ID: "DEV-2.allow-tools-duplicate", Summary: "allow_tools lists a tool twice"},

	// ID-1: principals.yaml.
	{ID: "ID-1.resource-url", Summary: "resource is not an absolute http(s) URL"},
	{ID: "ID-1.authorization-server-url", Summary: "an authorization server is not an https URL"},
	{ID: "ID-1.principal-id", Summary: "a principal id breaks the id grammar"},
	{ID: "ID-1.principal-duplicate", Summary: "a principal is declared twice"},
	{ID: "ID-1.tenant-name", Summary: "a principal's or issuer's tenant breaks the tenant grammar"},
	{ID: "ID-1.scope-grammar", Summary: "a principal's scope breaks the scope grammar"},
	{ID: "ID-1.scope-never-granted", Summary: "a principal is granted the scope that marks unclassified servers"},
	{ID: "ID-1.token-sha256", Summary: "a principal's token_sha256 is not 64 lower-case hex digits"},
	{ID: "ID-1.issuer-name", Summary: "an issuer name breaks the issuer-name grammar"},
	{ID: "ID-1.issuer-name-duplicate", Summary: "two issuers share a name"},
	{ID: "ID-1.issuer-duplicate", Summary: "two issuers share an iss URL"},
	{ID: "ID-1.issuer-url", Summary: "an issuer is not an https URL"},
	{ID: "ID-1.issuer-key-source", Summary: "an issuer without exactly one of jwks_url and key_file"},
	{ID: "ID-1.jwks-url", Summary: "jwks_url is not an https URL"},
	{ID: "ID-1.key-file-path", Summary: "key_file is not a path inside the spec root"},
	{ID: "ID-1.key-file-outside-root", Summary: "key_file does not resolve to a file in the spec root"},
	{ID: "ID-1.claim-empty", Summary: "an empty claims entry"},
	{ID: "ID-1.tenant-claim-unread", Summary: "claims.tenant on an issuer bound to one tenant"},
	{ID: "ID-1.algorithm", Summary: "an algorithm that is not an accepted asymmetric one"},
	{ID: "ID-1.issuer-tenant-missing", Summary: "an issuer bound to no tenant"},
	{ID: "ID-1.issuer-tenant-both", Summary: "an issuer with both tenant and tenants"},
	{ID: "ID-1.issuer-tenants-empty", Summary: "an issuer's tenants is empty"},
	{ID: "ID-1.issuer-tenant-duplicate", Summary: "an issuer's tenants lists a tenant twice"},
	{ID: "ID-1.client-id", Summary: "a console client_id that is not printable ASCII without spaces or quotes"},
	{ID: "ID-1.client-secret-env", Summary: "client_secret_env does not name an environment variable"},
	{ID: "ID-1.console-scope", Summary: "a console scope that is not printable ASCII without spaces or quotes"},
	{ID: "ID-1.console-scope-duplicate", Summary: "a console lists a scope twice"},
	{ID: "ID-1.redirect-url", Summary: "redirect_url is not an absolute https URL"},
	{ID: "ID-1.redirect-path", Summary: "redirect_url does not have the console's callback path"},

	// UI-1: notifications.yaml.
	{ID: "UI-1.console-url", Summary: "console_url is not a base https URL"},
	{ID: "UI-1.webhook-name", Summary: "a webhook name breaks the webhook-name grammar"},
	{ID: "UI-1.webhook-duplicate", Summary: "two webhooks share a name"},
	{ID: "UI-1.webhook-url-or-env", Summary: "a webhook without exactly one of url and url_env"},
	{ID: "UI-1.webhook-url", Summary: "a webhook url that is not an absolute https URL"},
	{ID: "UI-1.env-name", Summary: "url_env or secret_env does not name an environment variable"},
	{ID: "UI-1.value-not-allowed", Summary: "a webhook format that is not one of the formats"},
	{ID: "UI-1.webhook-unsigned", Summary: "a json webhook without secret_env"},
	{ID: "UI-1.events-empty", Summary: "a webhook's events is empty"},
	{ID: "UI-1.event-unknown", Summary: "an event that is not one of the events"},
	{ID: "UI-1.event-duplicate", Summary: "a webhook lists an event twice"},
	{ID: "UI-1.tenants-empty", Summary: "a webhook's tenants is empty"},
	{ID: "UI-1.tenant-name", Summary: "a webhook's tenant breaks the tenant grammar"},
	{ID: "UI-1.tenant-duplicate", Summary: "a webhook lists a tenant twice"},
	{ID: "UI-1.tenant-unknown", Summary: "a webhook names a tenant no principal is of"},
	{ID: "UI-1.max-attempts", Summary: "max_attempts outside 1 .. the maximum"},
	{ID: "UI-1.timeout-range", Summary: "a webhook timeout not more than 0 and at most the maximum"},
}
