# What `ansible all -i <inventory> --list-hosts --limit <pattern>` lists, for many patterns in one
# Python process: the ad hoc command's own code path (CLI.get_host_list) over a fresh inventory
# for each pattern, without starting the interpreter and loading ansible-core once per pattern.
# Usage: <ansible's python> ansible-host-lists.py <inventory file>  (patterns as a JSON list on stdin)
# Prints a JSON object: pattern -> {"hosts": [...]} or {"error": "<ansible's message>"}.
import json
import sys

from ansible.cli import CLI
from ansible.errors import AnsibleError
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader

inventory_file = sys.argv[1]
answers = {}
for pattern in json.load(sys.stdin):
    inventory = InventoryManager(loader=DataLoader(), sources=[inventory_file])
    try:
        answers[pattern] = {"hosts": sorted(host.name for host in CLI.get_host_list(inventory, pattern, "all"))}
    except AnsibleError as err:
        answers[pattern] = {"error": str(err)}
json.dump(answers, sys.stdout)
