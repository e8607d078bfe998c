import { heldLevel, LEVELS, levelName, runAllows, type RunAccessFacts } from '../../core/access/access';

describe('what a role lets an account hold', () => {
  test('an admin manages everything, whatever it is granted', () => {
    expect(heldLevel('admin', 0)).toBe(LEVELS.manage);
  });

  test('an operator holds what it is granted, up to manage', () => {
    for (const level of [0, LEVELS.read, LEVELS.use, LEVELS.manage]) expect(heldLevel('operator', level)).toBe(level);
  });

  test('a viewer uses at most: a manage grant or an organization admin role gives it use, never manage', () => {
    expect(heldLevel('viewer', LEVELS.manage)).toBe(LEVELS.use);
    expect(heldLevel('viewer', LEVELS.use)).toBe(LEVELS.use);
    expect(heldLevel('viewer', LEVELS.read)).toBe(LEVELS.read);
    expect(heldLevel('viewer', 0)).toBe(0);
  });

  test('levels are named for messages', () => {
    expect([0, 1, 2, 3].map(levelName)).toEqual(['none', 'read', 'use', 'manage']);
  });
});

describe('what a caller may do to a run', () => {
  const facts = (over: Partial<RunAccessFacts>): RunAccessFacts => ({ admin: false, requester: false, fromTemplate: true, templateLevel: 0, ...over });

  test('an admin does anything', () => {
    for (const action of ['read', 'cancel', 'rerun'] as const) expect(runAllows(action, facts({ admin: true, fromTemplate: false }))).toBe(true);
  });

  test('a template’s run is read by its template’s readers, canceled by its managers, rerun by its users', () => {
    const at = (templateLevel: number) => (['read', 'cancel', 'rerun'] as const).filter((action) => runAllows(action, facts({ templateLevel })));
    expect(at(0)).toEqual([]);
    expect(at(LEVELS.read)).toEqual(['read']);
    expect(at(LEVELS.use)).toEqual(['read', 'rerun']);
    expect(at(LEVELS.manage)).toEqual(['read', 'cancel', 'rerun']);
  });

  test('its requester reads and cancels it, and reruns it only while it may use the template', () => {
    expect(runAllows('read', facts({ requester: true }))).toBe(true);
    expect(runAllows('cancel', facts({ requester: true }))).toBe(true);
    expect(runAllows('rerun', facts({ requester: true }))).toBe(false);
    expect(runAllows('rerun', facts({ requester: true, templateLevel: LEVELS.use }))).toBe(true);
  });

  test('a plain run is its requester’s alone', () => {
    for (const action of ['read', 'cancel', 'rerun'] as const) {
      expect(runAllows(action, facts({ requester: true, fromTemplate: false }))).toBe(true);
      expect(runAllows(action, facts({ fromTemplate: false }))).toBe(false);
    }
  });
});
