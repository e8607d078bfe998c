# Reads an Ansible YAML inventory on stdin and prints the host names it names as a JSON list, or
# {"error": ...}. Cairn runs it to count a stored inventory's hosts (tools/ansible-inventory.ts):
# PyYAML's safe loader, as Ansible's own YAML inventory plugin reads it; host ranges are expanded
# by Cairn. Groups are walked once each, so aliases cannot make the walk grow.
# With the argument --addresses it prints instead [name, ansible_host, ansible_ssh_host] for each
# host (null where the host's own entries set none; a later entry overriding an earlier one), which
# a provisioning callback matches its caller by (services/callbacks.ts).
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
    addresses = len(sys.argv) > 1 and sys.argv[1] == '--addresses'
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
                entry = [key, None, None]
                seen_hosts[key] = entry
                hosts.append(entry)
            if addresses and isinstance(host_vars, dict):
                for i, var in ((1, 'ansible_host'), (2, 'ansible_ssh_host')):
                    value = host_vars.get(var)
                    if value is not None and not isinstance(value, (dict, list)) and str(value) != '':
                        seen_hosts[key][i] = str(value)
        children = group.get('children') or {}
        if not isinstance(children, dict):
            print(json.dumps({'error': 'children of group %s must be a mapping' % name}))
            return
        stack.extend(children.items())
    print(json.dumps(hosts if addresses else [entry[0] for entry in hosts]))


main()
