// Command ticket-notifier is Cairn's official ticket-system notifier plugin (spec part A 1.3
// rule 9): a run labelled with a change number or issue key (its `change`, e.g. OPS-42) is noted
// on that ticket when it ends, as a comment through the Jira REST API
// (POST {base}/rest/api/2/issue/{key}/comment), which Jira Cloud, Jira Data Center and
// Jira-compatible trackers answer.
//
// Settings (the plugin sees only SERVICE_PLUGIN_* variables of the server's environment):
//
//	SERVICE_PLUGIN_TICKET_URL       base URL of the tracker (required; unset: the notifier does nothing)
//	SERVICE_PLUGIN_TICKET_USER      user (email for Jira Cloud) for basic auth; unset: bearer token
//	SERVICE_PLUGIN_TICKET_TOKEN     API token (basic auth with the user) or personal access token
//	SERVICE_PLUGIN_TICKET_KEY_REGEX which labels are ticket keys (default ^[A-Z][A-Z0-9_]+-[0-9]+$)
//
// Build: go build -o /etc/cairn/plugins/50-ticket-notifier ./plugins/ticket-notifier
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"

	"cairn.dev/sdk/plugin"
)

func main() {
	ext := plugin.New()
	ext.RegisterNotifier("ticket-system", notify)
	plugin.Serve(ext)
}

func notify(ctx context.Context, ev plugin.RunEvent) error {
	base := strings.TrimRight(os.Getenv("SERVICE_PLUGIN_TICKET_URL"), "/")
	if base == "" {
		return nil
	}
	pattern := os.Getenv("SERVICE_PLUGIN_TICKET_KEY_REGEX")
	if pattern == "" {
		pattern = `^[A-Z][A-Z0-9_]+-[0-9]+$`
	}
	keyRe, err := regexp.Compile(pattern)
	if err != nil {
		return fmt.Errorf("SERVICE_PLUGIN_TICKET_KEY_REGEX: %w", err)
	}
	key := ev.Labels["change"]
	if key == "" || !keyRe.MatchString(key) {
		return nil
	}
	exit := "none"
	if ev.ExitCode != nil {
		exit = fmt.Sprint(*ev.ExitCode)
	}
	text := fmt.Sprintf("Cairn run %s (%s) ended %s, exit code %s. %s", ev.RunID, ev.Tool, ev.Status, exit, ev.URL)
	body, _ := json.Marshal(map[string]string{"body": text})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/rest/api/2/issue/"+url.PathEscape(key)+"/comment", bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	token := os.Getenv("SERVICE_PLUGIN_TICKET_TOKEN")
	if user := os.Getenv("SERVICE_PLUGIN_TICKET_USER"); user != "" {
		req.SetBasicAuth(user, token)
	} else if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusCreated && res.StatusCode != http.StatusOK {
		snippet, _ := io.ReadAll(io.LimitReader(res.Body, 300))
		return fmt.Errorf("noting run %s on %s: %s %s", ev.RunID, key, res.Status, strings.TrimSpace(string(snippet)))
	}
	return nil
}
