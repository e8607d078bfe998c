import { fleetInventory, groupName, type FleetGroup, type FleetHost } from './fleet';
import { isObject, listAt, malformed, objectAt, optionalString, stringAt, type ImportPlan, type Json, type LeftOut } from './plan';

/**
 * `cookbook`: a Chef fleet (spec part A 4.14 rule 2) as one inventory. The body is Chef's own
 * JSON of nodes and roles, as `knife node show -l -F json`, `knife role show -F json` and
 * `knife download nodes roles` write them: a list of such objects, one object, or
 * `{"nodes": [...], "roles": [...]}`. Each node is a host (`ansible_host` its `ipaddress`); each
 * role a group `role_<name>` holding the nodes whose run list names it, with the role's override
 * attributes merged over its default attributes (at every depth, as Chef merges) as the group's variables and the roles its own run
 * list names as parents; each environment a group `env_<name>`.
 */
export function readCookbook(body: unknown, options: { name?: string }): ImportPlan {
  const items = chefObjects(body);
  const leftOut: LeftOut[] = [];
  const nodes: { item: Json; at: string }[] = [];
  const roles: { item: Json; at: string }[] = [];
  for (const { item, at } of items) {
    const type = typeof item.chef_type === 'string' ? item.chef_type : typeof item.json_class === 'string' ? item.json_class.replace(/^Chef::/, '').toLowerCase() : '';
    if (type === 'node') nodes.push({ item, at });
    else if (type === 'role') roles.push({ item, at });
    else leftOut.push({ kind: type || 'object', name: String(item.name ?? ''), source: at, reason: `a Chef ${type || 'object without chef_type or json_class'} is not part of a fleet's inventory` });
  }
  if (!nodes.length) throw malformed('body', 'holds no Chef node (an object with chef_type "node" or json_class "Chef::Node")');

  const groups = new Map<string, FleetGroup>();
  for (const { item, at } of roles) {
    const name = stringAt(item.name, `${at}.name`);
    const vars = deepMerge(attributes(item.default_attributes, `${at}.default_attributes`), attributes(item.override_attributes, `${at}.override_attributes`));
    groups.set(groupName('role', name), { vars, children: [] });
  }
  // A role another role's run list names holds that role's nodes too: the naming role is its child.
  for (const { item, at } of roles) {
    for (const inner of runListRoles(item.run_list, `${at}.run_list`)) {
      const parent = groups.get(groupName('role', inner)) ?? { vars: {}, children: [] };
      parent.children.push(groupName('role', stringAt(item.name, `${at}.name`)));
      groups.set(groupName('role', inner), parent);
    }
  }
  const hosts: FleetHost[] = nodes.map(({ item, at }) => {
    const name = stringAt(item.name, `${at}.name`);
    const automatic = item.automatic === undefined ? {} : objectAt(item.automatic, `${at}.automatic`);
    const environment = optionalString(item.chef_environment, `${at}.chef_environment`) ?? '_default';
    const runList = listAt(item.run_list, `${at}.run_list`).map((entry, i) => stringAt(entry, `${at}.run_list[${i}]`));
    const vars: Record<string, unknown> = {
      ...(typeof automatic.ipaddress === 'string' ? { ansible_host: automatic.ipaddress } : {}),
      chef_environment: environment,
      chef_run_list: runList,
      ...(typeof automatic.platform === 'string' ? { chef_platform: automatic.platform } : {}),
      ...(typeof automatic.platform_version === 'string' ? { chef_platform_version: automatic.platform_version } : {}),
    };
    return { name, vars, groups: [groupName('env', environment), ...runListRoles(item.run_list, `${at}.run_list`).map((r) => groupName('role', r))] };
  });
  const seen = new Set<string>();
  for (const [i, host] of hosts.entries()) {
    if (seen.has(host.name)) throw malformed(`${nodes[i].at}.name`, `names node ${host.name} a second time`);
    seen.add(host.name);
  }
  const name = options.name ?? 'Chef nodes';
  return {
    format: 'cookbook',
    objects: [
      {
        kind: 'inventory',
        external_id: `fleet/${name}`,
        name,
        source: 'body',
        draft: { name, content: fleetInventory(hosts, groups), format: 'yaml' },
        notes: [`${hosts.length} nodes and ${roles.length} roles; a node's normal, default, override and automatic attributes are not carried beyond its ipaddress and platform`],
      },
    ],
    left_out: leftOut,
  };
}

function chefObjects(body: unknown): { item: Json; at: string }[] {
  if (Array.isArray(body)) return body.map((item, i) => ({ item: objectAt(item, `[${i}]`), at: `[${i}]` }));
  const doc = objectAt(body, 'body');
  if ('nodes' in doc || 'roles' in doc) {
    return [
      ...listAt(doc.nodes, 'nodes').map((item, i) => ({ item: objectAt(item, `nodes[${i}]`), at: `nodes[${i}]` })),
      ...listAt(doc.roles, 'roles').map((item, i) => ({ item: objectAt(item, `roles[${i}]`), at: `roles[${i}]` })),
    ];
  }
  return [{ item: doc, at: 'body' }];
}

/** `over` merged into `under` key by key at every depth, as Chef merges attribute levels. */
function deepMerge(under: Record<string, unknown>, over: Record<string, unknown>): Record<string, unknown> {
  const merged: Record<string, unknown> = { ...under };
  for (const [key, value] of Object.entries(over)) {
    const below = merged[key];
    merged[key] = isObject(below) && isObject(value) ? deepMerge(below, value) : value;
  }
  return merged;
}

function attributes(value: unknown, field: string): Record<string, unknown> {
  if (value === undefined || value === null) return {};
  return objectAt(value, field);
}

/** The roles a run list names (`role[web]`), in order. */
function runListRoles(value: unknown, field: string): string[] {
  return listAt(value, field).flatMap((entry, i) => {
    const match = /^role\[(.+)\]$/.exec(stringAt(entry, `${field}[${i}]`));
    return match ? [match[1]] : [];
  });
}
