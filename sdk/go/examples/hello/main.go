// Command hello is a runnable Cairn plugin (docs/extensions.md): a tool, a notifier, a static
// secret source, a dynamic one and an AI provider.
//
//	go build -o /etc/cairn/plugins/10-hello ./examples/hello
//	cairn serve --plugins-dir /etc/cairn/plugins
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"cairn.dev/sdk/plugin"
)

func main() {
	ext := plugin.New()

	// A tool: runs inside the run's sandbox; prints a greeting and, in a dry run, changes nothing.
	ext.RegisterTool("hello", func(ctx context.Context, spec plugin.ToolSpec) (plugin.ToolResult, error) {
		who, _ := spec.ExtraVars["who"].(string)
		if who == "" {
			who = "world"
		}
		if spec.DryRun {
			fmt.Printf("would greet %s\n", who)
			return plugin.ToolResult{}, nil
		}
		fmt.Printf("hello, %s\n", who)
		if spec.Command == "fail" {
			return plugin.ToolResult{ExitCode: 3}, nil
		}
		return plugin.ToolResult{}, nil
	})

	// A notifier: appends each run's end to the file SERVICE_PLUGIN_HELLO_NOTIFY_FILE names, if set.
	ext.RegisterNotifier("hello-file", func(ctx context.Context, ev plugin.RunEvent) error {
		path := os.Getenv("SERVICE_PLUGIN_HELLO_NOTIFY_FILE")
		if path == "" {
			return nil
		}
		line, _ := json.Marshal(ev)
		f, err := os.OpenFile(path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = f.Write(append(line, '\n'))
		return err
	})

	// A static secret source: reads the plugin's own environment (shows what a plugin can see).
	ext.RegisterSecretSource("hello-env", func(ctx context.Context, ref string) (string, error) {
		return os.Getenv(ref), nil
	})

	// A dynamic source: mints a secret per run as a file in SERVICE_PLUGIN_HELLO_LEASE_DIR; revoking removes it.
	ext.RegisterDynamicSecretSource("hello-lease", func(ctx context.Context, ref, runID string) (*plugin.SecretLease, error) {
		dir := os.Getenv("SERVICE_PLUGIN_HELLO_LEASE_DIR")
		if dir == "" {
			dir = os.TempDir()
		}
		id := fmt.Sprintf("%s-%d", runID, time.Now().UnixNano())
		value := "lease-secret-" + strings.ReplaceAll(id, "/", "_")
		path := filepath.Join(dir, id)
		if err := os.WriteFile(path, []byte(ref), 0o600); err != nil {
			return nil, err
		}
		return plugin.NewSecretLease(value, id, time.Minute, func(ctx context.Context) error { return os.Remove(path) }), nil
	})

	// An AI provider: echoes, for trying the seam without a model.
	ext.RegisterAIProvider("hello-echo", func(ctx context.Context, s plugin.AISettings, system, prompt string) (string, error) {
		return fmt.Sprintf("[%s] %s", s.Model, prompt), nil
	})

	plugin.Serve(ext)
}
