import { browserOpener } from '../../cli/desktop';

test('cairn desktop opens the console with the platform’s own opener, and with none on a machine without a display', () => {
  expect(browserOpener('linux', { DISPLAY: ':0' })).toEqual({ command: 'xdg-open', args: [] });
  expect(browserOpener('linux', { WAYLAND_DISPLAY: 'wayland-0' })).toEqual({ command: 'xdg-open', args: [] });
  expect(browserOpener('linux', {})).toBeUndefined();
  expect(browserOpener('freebsd', {})).toBeUndefined();
  expect(browserOpener('darwin', {})).toEqual({ command: 'open', args: [] });
  expect(browserOpener('win32', {})).toEqual({ command: 'cmd', args: ['/c', 'start', '""'] });
});
