/**
 * A job's sequence of steps as one bash script, for the `bash` tool (spec part A 4.14: the
 * `jobsched` and `ciserver` formats). Each command step runs in a subshell, each script step from
 * a file of its own (so its `#!` line, or the interpreter the job named, runs it as it ran
 * before); a step's failure stops the job unless the job kept going, when it fails at its end.
 */

export interface ScriptStep {
  /** How the step is named in a comment above it. */
  label: string;
  /** `command`: a command line; `script`: the text of a script file. */
  kind: 'command' | 'script';
  text: string;
  /** Arguments given to a script, as shell words. */
  args?: string | null;
  /** The interpreter a script is run with (`sh -xe`), or null to run it by its `#!` line. */
  interpreter?: string | null;
  /** The script's path and arguments given to the interpreter as one argument (Rundeck's `interpreterArgsQuoted`). */
  quoted?: boolean;
  /** What runs when the step fails, and whether its success lets the job go on. */
  handler?: (ScriptStep & { recovers: boolean }) | null;
}

export function bashScript(header: string[], prologue: string[], steps: ScriptStep[], keepGoing: boolean): string {
  const lines = ['#!/usr/bin/env bash', ...header.map((line) => `# ${line}`.trimEnd()), ...prologue, 'cairn_failed=0'];
  steps.forEach((step, i) => {
    const n = i + 1;
    lines.push('', `# step ${n}: ${oneLine(step.label)}`, ...run(step, `${n}`, 'cairn_rc'));
    lines.push('if [ "$cairn_rc" -ne 0 ]; then', `  echo "cairn: step ${n} failed with exit code $cairn_rc" >&2`);
    if (step.handler) {
      lines.push(`  # its error handler: ${oneLine(step.handler.label)}`, ...run(step.handler, `${n}_HANDLER`, 'cairn_handler_rc').map((l) => `  ${l}`));
      if (step.handler.recovers) lines.push('  if [ "$cairn_handler_rc" -eq 0 ]; then cairn_rc=0; fi');
    }
    lines.push('fi');
    lines.push(keepGoing ? 'if [ "$cairn_rc" -ne 0 ]; then cairn_failed=1; fi' : 'if [ "$cairn_rc" -ne 0 ]; then exit "$cairn_rc"; fi');
  });
  lines.push('', 'exit "$cairn_failed"');
  return lines.join('\n') + '\n';
}

const oneLine = (text: string) => text.replace(/\s+/g, ' ').trim();

function run(step: ScriptStep, tag: string, rc: string): string[] {
  if (step.kind === 'command') return ['(', step.text.replace(/\n+$/, ''), ')', `${rc}=$?`];
  const body = step.text.endsWith('\n') ? step.text : `${step.text}\n`;
  let delimiter = `CAIRN_STEP_${tag}`;
  while (body.split('\n').includes(delimiter)) delimiter += '_';
  const args = step.args?.trim() ? ` ${step.args.trim()}` : '';
  const invoke = step.interpreter
    ? step.quoted
      ? `${step.interpreter} "\\"$cairn_step\\"${args.replace(/(["\\`])/g, '\\$1')}"`
      : `${step.interpreter} "$cairn_step"${args}`
    : `"$cairn_step"${args}`;
  return [
    'cairn_step=$(mktemp) || exit 1',
    `cat >"$cairn_step" <<'${delimiter}'`,
    ...body.replace(/\n$/, '').split('\n'),
    delimiter,
    'chmod 700 "$cairn_step"',
    invoke,
    `${rc}=$?`,
    'rm -f "$cairn_step"',
  ];
}

/** A Rundeck or Jenkins duration (`90`, `30m`, `1h30m`, `2d`) in seconds, or null when it is not one. */
export function durationSeconds(text: string): number | null {
  const trimmed = text.trim();
  if (/^\d+$/.test(trimmed)) return Number(trimmed);
  const units: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400 };
  let total = 0;
  const rest = trimmed.replace(/(\d+)\s*([smhd])/g, (_all, n: string, unit: string) => {
    total += Number(n) * units[unit];
    return '';
  });
  return rest.trim() === '' && total > 0 ? total : null;
}

/** A template that runs an imported job's script with the bash tool: nothing else of a template is carried. */
export function bashTemplateDraft<S>(name: string, command: string, timeout: number | null, survey: S) {
  return {
    name,
    tool: 'bash' as const,
    command,
    playbook: null, limit: null, tags: null, skip_tags: null, forks: null, verbosity: null, diff_mode: null,
    extra_vars: null,
    timeout,
    survey,
    steps: null,
    allow_callbacks: false,
    external_callback: false,
  };
}
