// Package plugin is Cairn's extension SDK: a plugin is an executable that registers tools,
// notifiers, secret sources and AI providers on an Extension and then calls Serve. Cairn
// (`cairn serve --plugins-dir DIR`, `cairn worker --plugins-dir DIR`) launches it over
// HashiCorp go-plugin (magic cookie, mutual TLS, gRPC) and asks what it provides.
//
// Registration happens only before Serve; an empty, duplicate or reserved name panics at boot,
// so a mistake shows the first time the plugin is started, not in the middle of a run.
//
// A tool's runner never runs in the long-lived plugin process: for every run, Cairn starts the
// same executable inside the run's sandbox with the run's bounds (CAIRN_PLUGIN_TOOL set), Serve
// calls the runner there with the run's ToolSpec and exits with its exit code, and the output is
// masked and stored like any built-in tool's. So the bytes a user controls reach only the sandbox.
package plugin

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"
)

// ProtocolVersion is the go-plugin application protocol version this SDK speaks
// (PLUGIN_PROTOCOL_VERSIONS); the host refuses a plugin that speaks none it knows.
const ProtocolVersion = 1

// ToolSpec is what a tool's runner gets for one run, inside the run's sandbox.
type ToolSpec struct {
	// Command is the run's command text (the `command` of POST /v1/runs), if any.
	Command string
	// DryRun is true for a check-mode run: change nothing, report what would change.
	DryRun bool
	// ExtraVars are the run's extra vars (spec 2.1), the tool's input.
	ExtraVars map[string]any
	// Env is the run's environment (credentials injected as the run's credentials say).
	Env map[string]string
	// Dir is the run's work directory (the current directory too).
	Dir string
}

// ToolResult is what a tool's runner returns; ExitCode 0 is success.
type ToolResult struct {
	ExitCode int
}

// ToolRunner runs a tool. Print to stdout and stderr; Cairn masks and stores both.
type ToolRunner func(ctx context.Context, spec ToolSpec) (ToolResult, error)

// RunEvent is what a notifier gets once per terminal top-level run. Extra vars are redacted.
type RunEvent struct {
	RunID      string            `json:"runId"`
	Tool       string            `json:"tool"`
	Status     string            `json:"status"`
	ExitCode   *int              `json:"exitCode"`
	Labels     map[string]string `json:"labels"`
	StartedAt  *time.Time        `json:"startedAt"`
	FinishedAt *time.Time        `json:"finishedAt"`
	URL        string            `json:"url"`
	ExtraVars  map[string]any    `json:"extraVars"`
}

// Notifier delivers a run's end somewhere. Cairn calls it off the executor path with a bounded
// timeout; an error is logged and dropped.
type Notifier func(ctx context.Context, event RunEvent) error

// SecretSource returns the secret a credential names by ref (a path, a key), at run time.
type SecretSource func(ctx context.Context, ref string) (string, error)

// SecretLease is a short-lived secret minted for one run; Revoke is called when the run ends.
type SecretLease struct {
	Value  string
	ID     string
	TTL    time.Duration
	revoke func(ctx context.Context) error
}

// NewSecretLease makes a lease: value is the secret, id names the lease (never secret), and
// revoke ends it. Cairn calls revoke, in this process, when the run ends.
func NewSecretLease(value, id string, ttl time.Duration, revoke func(ctx context.Context) error) *SecretLease {
	if id == "" {
		panic("cairn: a secret lease needs an id")
	}
	return &SecretLease{Value: value, ID: id, TTL: ttl, revoke: revoke}
}

// DynamicSecretSource mints a secret for one run.
type DynamicSecretSource func(ctx context.Context, ref string, runID string) (*SecretLease, error)

// AISettings are what an AI provider is built from (the operator's settings).
type AISettings struct {
	Model    string `json:"model"`
	Endpoint string `json:"endpoint"`
	APIKey   string `json:"apiKey"`
}

// AIProvider answers a system instruction and a prompt with text. Advice only.
type AIProvider func(ctx context.Context, settings AISettings, system, prompt string) (string, error)

// ReservedToolNames are Cairn's built-in tools; a plugin cannot take them.
var ReservedToolNames = []string{"ansible", "bash", "terraform", "opentofu", "python", "powershell", "go"}

// Extension holds what a plugin provides. Make one with New, register, then Serve it.
type Extension struct {
	mu            sync.Mutex
	served        bool
	names         map[string]bool
	tools         map[string]ToolRunner
	notifiers     map[string]Notifier
	secrets       map[string]SecretSource
	dynamics      map[string]DynamicSecretSource
	aiProviders   map[string]AIProvider
	leases        map[string]*SecretLease
	toolOrder     []string
	notifierOrder []string
	secretOrder   []string
	dynamicOrder  []string
	aiOrder       []string
}

// New returns an empty Extension.
func New() *Extension {
	return &Extension{
		names: map[string]bool{}, tools: map[string]ToolRunner{}, notifiers: map[string]Notifier{},
		secrets: map[string]SecretSource{}, dynamics: map[string]DynamicSecretSource{},
		aiProviders: map[string]AIProvider{}, leases: map[string]*SecretLease{},
	}
}

func (e *Extension) claim(kind, name string, reserved []string) {
	if e.served {
		panic(fmt.Sprintf("cairn: %s %q registered after Serve", kind, name))
	}
	if strings.TrimSpace(name) == "" || name != strings.TrimSpace(name) {
		panic(fmt.Sprintf("cairn: a %s needs a name without surrounding spaces", kind))
	}
	for _, r := range reserved {
		if r == name {
			panic(fmt.Sprintf("cairn: %s name %q is reserved by Cairn", kind, name))
		}
	}
	key := kind + "\x00" + name
	if e.names[key] {
		panic(fmt.Sprintf("cairn: %s %q is registered twice", kind, name))
	}
	e.names[key] = true
}

// RegisterTool adds a tool runs can name (`tool: "<name>"`).
func (e *Extension) RegisterTool(name string, runner ToolRunner) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if runner == nil {
		panic(fmt.Sprintf("cairn: tool %q has no runner", name))
	}
	e.claim("tool", name, ReservedToolNames)
	e.tools[name] = runner
	e.toolOrder = append(e.toolOrder, name)
}

// RegisterNotifier adds a notifier told of every terminal top-level run.
func (e *Extension) RegisterNotifier(name string, n Notifier) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if n == nil {
		panic(fmt.Sprintf("cairn: notifier %q is nil", name))
	}
	e.claim("notifier", name, nil)
	e.notifiers[name] = n
	e.notifierOrder = append(e.notifierOrder, name)
}

// RegisterSecretSource adds a static secret source credentials can read from at run time.
func (e *Extension) RegisterSecretSource(name string, s SecretSource) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s == nil {
		panic(fmt.Sprintf("cairn: secret source %q is nil", name))
	}
	e.claim("secret source", name, nil)
	e.secrets[name] = s
	e.secretOrder = append(e.secretOrder, name)
}

// RegisterDynamicSecretSource adds a source that mints a secret per run, revoked at run end.
func (e *Extension) RegisterDynamicSecretSource(name string, s DynamicSecretSource) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if s == nil {
		panic(fmt.Sprintf("cairn: dynamic secret source %q is nil", name))
	}
	e.claim("secret source", name, nil)
	e.dynamics[name] = s
	e.dynamicOrder = append(e.dynamicOrder, name)
}

// RegisterAIProvider adds an AI provider backend.
func (e *Extension) RegisterAIProvider(name string, p AIProvider) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if p == nil {
		panic(fmt.Sprintf("cairn: AI provider %q is nil", name))
	}
	e.claim("AI provider", name, nil)
	e.aiProviders[name] = p
	e.aiOrder = append(e.aiOrder, name)
}
