import { parsePolicyFile } from '../../core/runs/policy-file';

describe('the policy file (--policy-file)', () => {
  test('defaults: syntax v1, warn hold, a 1 s timeout, no reason or distinct approver', () => {
    expect(parsePolicyFile('policies:\n  - name: a\n    modules: [a.rego]\n')).toEqual([
      { name: 'a', modules: ['a.rego'], syntax: 'v1', warn: 'hold', timeout: 1000, require_reason: false, require_distinct_approver: false },
    ]);
  });

  test('JSON is read too; a timeout is seconds, or ms and s', () => {
    const entries = parsePolicyFile('{"policies":[{"name":"a","modules":["a.rego"],"timeout":0.25},{"name":"b","modules":["b.rego"],"timeout":"2s"},{"name":"c","modules":["c.rego"],"timeout":"750ms"}]}');
    expect(entries.map((e) => e.timeout)).toEqual([250, 2000, 750]);
  });

  test.each([
    ['policies:\n  - name: a\n    modules: [a.rego]\n    effect: deny\n', 'policies[0]: unknown field "effect"'],
    ['policies: []\nextra: 1\n', 'the file: unknown field "extra"'],
    ['policies:\n  - name: a\n    modules: []\n', 'policies[0].modules: expected at least one Rego module'],
    ['policies:\n  - name: a\n    modules: [a.rego]\n    syntax: v2\n', 'policies[0].syntax: expected v1 or v0'],
    ['policies:\n  - name: a\n    modules: [a.rego]\n    timeout: 31s\n', 'policies[0].timeout: "31s" is not a timeout from 1ms to 30s (try 500ms or 2s)'],
    ['policies:\n  - name: a\n    modules: [a.rego]\n  - name: a\n    modules: [b.rego]\n', 'policies[1].name: "a" names two policies'],
    ['policies: [\n', 'not YAML or JSON'],
  ])('%j is refused: %s', (text, message) => {
    expect(() => parsePolicyFile(text)).toThrow(message);
  });
});
