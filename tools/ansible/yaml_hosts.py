# Reads an Ansible YAML inventory on stdin and prints the host names it names as a JSON list, or
# {"error": ...}. Cairn runs it to count a stored inventory's hosts (tools/ansible-inventory.ts):
# PyYAML's safe loader, as Ansible's own YAML inventory plugin reads it; host ranges are expanded
# by Cairn. Groups are walked once each, so aliases cannot make the walk grow.
# With the argument --layout it prints instead what a host's address is resolved from (a
# provisioning callback matches its caller by it, services/callbacks.ts):
#   {"groups": [[name, [host, ...], [child group, ...], {address vars}], ...],
#    "hosts": [[host, {address vars}], ...]}
# a group once per place it is named (Cairn merges them by name, as Ansible does), and each host
# entry that sets an address variable in the order Ansible's YAML plugin reads them (depth first,
# a group's sections in the order it writes them), so that a later entry overrides an earlier one. The address
# vars are ansible_host and ansible_ssh_host (as strings) and, of a group, ansible_group_priority.
import json
import sys

import yaml

try:
    Loader = yaml.CSafeLoader
except AttributeError:
    Loader = yaml.SafeLoader


def main():
    try:
        doc = yaml.load(sys.stdin.buffer, Loader=Loader)
    except yaml.YAMLError as err:
        mark = getattr(err, 'problem_mark', None)
        where = ' at line %d' % (mark.line + 1) if mark is not None else ''
        print(json.dumps({'error': 'not valid YAML%s: %s' % (where, getattr(err, 'problem', None) or 'unreadable')}))
        return
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        print(json.dumps({'error': 'a YAML inventory must be a mapping of groups'}))
        return
    if len(sys.argv) > 1 and sys.argv[1] == '--layout':
        print(json.dumps(layout(doc)))
        return
    hosts = []
    seen_hosts = {}
    seen_groups = set()
    stack = list(doc.items())
    while stack:
        name, group = stack.pop(0)
        if id(group) in seen_groups and group is not None:
            continue
        if group is not None:
            seen_groups.add(id(group))
        if group is None:
            continue
        if not isinstance(group, dict):
            print(json.dumps({'error': 'group %s must be a mapping' % name}))
            return
        members = group.get('hosts') or {}
        if not isinstance(members, dict):
            print(json.dumps({'error': 'hosts of group %s must be a mapping' % name}))
            return
        for host, host_vars in members.items():
            key = str(host)
            if key not in seen_hosts:
                seen_hosts[key] = True
                hosts.append(key)
        children = group.get('children') or {}
        if not isinstance(children, dict):
            print(json.dumps({'error': 'children of group %s must be a mapping' % name}))
            return
        stack.extend(children.items())
    print(json.dumps(hosts))


class Fault(Exception):
    pass


def address_vars(variables, group=False):
    found = {}
    for var in ('ansible_host', 'ansible_ssh_host'):
        value = variables.get(var)
        if value is not None and not isinstance(value, (dict, list)) and str(value) != '':
            found[var] = str(value)
    if group:
        priority = variables.get('ansible_group_priority')
        if isinstance(priority, int) and not isinstance(priority, bool):
            found['ansible_group_priority'] = priority
        elif isinstance(priority, str) and priority.strip().lstrip('-').isdigit():
            found['ansible_group_priority'] = int(priority)
    return found


def layout(doc):
    groups = []
    host_entries = []
    walked = {}
    on_path = set()
    # Depth first without recursion, each group's sections in the order it writes them, as
    # Ansible's YAML plugin reads them: ('group', name, data), ('entries', host entries), or
    # ('done', id, record, own host entries).
    stack = [('group', str(name), group) for name, group in reversed(list(doc.items()))]
    try:
        while stack:
            step = stack.pop()
            if step[0] == 'entries':
                host_entries.extend(step[1])
                continue
            if step[0] == 'done':
                _, key, record, entries = step
                walked[key] = (record, entries)
                on_path.discard(key)
                continue
            _, name, group = step
            if group is None:
                groups.append([name, [], [], {}])
                continue
            key = id(group)
            if key in walked:
                record, entries = walked[key]
                groups.append([name] + record[1:])
                host_entries.extend(entries)
                continue
            if key in on_path:
                continue
            if not isinstance(group, dict):
                raise Fault('group %s must be a mapping' % name)
            parts = {}
            for part in ('vars', 'children', 'hosts'):
                value = group.get(part) or {}
                if isinstance(value, str):
                    value = {value: None}
                if not isinstance(value, dict):
                    if part == 'vars':
                        # Ansible refuses it when the inventory is used; no address comes from it.
                        value = {}
                    else:
                        raise Fault('%s of group %s must be a mapping' % (part, name))
                parts[part] = value
            record = [name, [str(h) for h in parts['hosts']], [str(c) for c in parts['children']], address_vars(parts['vars'], True)]
            groups.append(record)
            entries = []
            for host, host_vars in parts['hosts'].items():
                found = address_vars(host_vars) if isinstance(host_vars, dict) else {}
                if found:
                    entries.append([str(host), found])
            on_path.add(key)
            steps = []
            for section in group:
                if section == 'children':
                    steps.extend(('group', str(child), data) for child, data in parts['children'].items())
                elif section == 'hosts':
                    steps.append(('entries', entries))
            steps.append(('done', key, record, entries))
            stack.extend(reversed(steps))
    except Fault as err:
        return {'error': str(err)}
    return {'groups': groups, 'hosts': host_entries}


main()
