# Cairn's Ansible callback plugin: per-host and per-task results of a run, as JSON lines.
#
# Cairn writes this file into each ansible run's work dir and enables it with
# ANSIBLE_CALLBACK_PLUGINS and ANSIBLE_CALLBACKS_ENABLED; it appends one JSON object per line to
# the file named by CAIRN_ANSIBLE_RESULTS, which Cairn reads when the run's process has exited
# (tools/ansible-results.ts parses it). Lines:
#   {"type": "task", "play": ..., "task": ..., "started": <epoch s>, "finished": <epoch s>, "hosts": {host: status}}
#   {"type": "host", "host": ..., "counts": {"ok": n, "changed": n, "failed": n, "unreachable": n, "skipped": n, "rescued": n, "ignored": n}}
#   {"type": "end", "hosts": <hosts processed>}
# Only names, statuses, counts and times: never a module's output, which may hold secrets.
from __future__ import absolute_import, division, print_function
__metaclass__ = type

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = '''
    name: cairn_results
    type: notification
    short_description: per-host and per-task results for Cairn
    description:
      - Appends per-host and per-task results as JSON lines to the file named by CAIRN_ANSIBLE_RESULTS.
'''


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'notification'
    CALLBACK_NAME = 'cairn_results'
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super(CallbackModule, self).__init__(*args, **kwargs)
        path = os.environ.get('CAIRN_ANSIBLE_RESULTS')
        self._out = open(path, 'a', encoding='utf-8') if path else None
        self._play = None
        self._task = None

    def _write(self, record):
        if self._out is None:
            return
        self._out.write(json.dumps(record, separators=(',', ':')) + '\n')
        self._out.flush()

    def _finish_task(self):
        task = self._task
        self._task = None
        if task is None:
            return
        if task['finished'] is None:
            task['finished'] = time.time()
        self._write(task)

    def _start_task(self, task):
        self._finish_task()
        self._task = {'type': 'task', 'play': self._play, 'task': task.get_name().strip(), 'started': time.time(), 'finished': None, 'hosts': {}}

    def _host_result(self, result, status):
        if self._task is None:
            return
        self._task['hosts'][result._host.get_name()] = status
        self._task['finished'] = time.time()

    def v2_playbook_on_play_start(self, play):
        self._finish_task()
        self._play = play.get_name().strip() or None

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._start_task(task)

    def v2_playbook_on_handler_task_start(self, task):
        self._start_task(task)

    def v2_runner_on_ok(self, result):
        self._host_result(result, 'changed' if result._result.get('changed', False) else 'ok')

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._host_result(result, 'ignored' if ignore_errors else 'failed')

    def v2_runner_on_unreachable(self, result):
        self._host_result(result, 'unreachable')

    def v2_runner_on_skipped(self, result):
        self._host_result(result, 'skipped')

    def v2_playbook_on_stats(self, stats):
        self._finish_task()
        hosts = sorted(stats.processed.keys())
        for host in hosts:
            s = stats.summarize(host)
            self._write({'type': 'host', 'host': host, 'counts': {
                'ok': s.get('ok', 0), 'changed': s.get('changed', 0), 'failed': s.get('failures', 0),
                'unreachable': s.get('unreachable', 0), 'skipped': s.get('skipped', 0),
                'rescued': s.get('rescued', 0), 'ignored': s.get('ignored', 0)}})
        self._write({'type': 'end', 'hosts': len(hosts)})
