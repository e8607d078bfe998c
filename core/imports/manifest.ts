import { fleetInventory, groupName, type FleetHost } from './fleet';
import { isObject, listAt, malformed, objectAt, optionalString, stringAt, type ImportPlan, type Json, type LeftOut } from './plan';

/**
 * `manifest`: a Puppet fleet (spec part A 4.14 rule 2) as one inventory, from PuppetDB's query
 * API: `{"nodes": [...], "facts": [...]}` where `nodes` is the answer of `/pdb/query/v4/nodes`
 * and `facts` that of `/pdb/query/v4/facts` (one `{certname, name, value}` per fact), or the
 * `nodes` list alone. Each active node is a host (`ansible_host` its `ipaddress` fact, or
 * `networking.ip`); groups are `env_<environment>` (its catalog's environment), `os_<family>`
 * (its `os.family` fact) and `role_<role>` (its `role` fact or trusted `pp_role` extension).
 */
export function readManifest(body: unknown, options: { name?: string }): ImportPlan {
  const doc = Array.isArray(body) ? { nodes: body } : objectAt(body, 'body');
  if (!Array.isArray(doc.nodes)) throw malformed('nodes', 'must be a list: the answer of PuppetDB /pdb/query/v4/nodes');
  const facts = new Map<string, Map<string, unknown>>();
  listAt(doc.facts, 'facts').forEach((raw, i) => {
    const fact = objectAt(raw, `facts[${i}]`);
    const certname = stringAt(fact.certname, `facts[${i}].certname`);
    const of = facts.get(certname) ?? new Map<string, unknown>();
    of.set(stringAt(fact.name, `facts[${i}].name`), fact.value);
    facts.set(certname, of);
  });
  const leftOut: LeftOut[] = [];
  const hosts: FleetHost[] = [];
  const seen = new Set<string>();
  doc.nodes.forEach((raw: unknown, i: number) => {
    const at = `nodes[${i}]`;
    const node = objectAt(raw, at);
    const certname = stringAt(node.certname, `${at}.certname`);
    if (node.deactivated || node.expired) return leftOut.push({ kind: 'host', name: certname, source: at, reason: `the node is ${node.deactivated ? 'deactivated' : 'expired'} in PuppetDB` });
    if (seen.has(certname)) throw malformed(`${at}.certname`, `names node ${certname} a second time`);
    seen.add(certname);
    const own = facts.get(certname) ?? new Map<string, unknown>();
    const environment = optionalString(node.catalog_environment, `${at}.catalog_environment`) ?? optionalString(node.facts_environment, `${at}.facts_environment`);
    const address = typeof own.get('ipaddress') === 'string' ? own.get('ipaddress') : path(own.get('networking'), 'ip');
    const family = path(own.get('os'), 'family');
    const role = typeof own.get('role') === 'string' ? own.get('role') : path(path(own.get('trusted'), 'extensions'), 'pp_role');
    const vars: Record<string, unknown> = {
      ...(typeof address === 'string' ? { ansible_host: address } : {}),
      ...(environment ? { puppet_environment: environment } : {}),
      ...(typeof node.latest_report_status === 'string' ? { puppet_report_status: node.latest_report_status } : {}),
    };
    const groups = [
      ...(environment ? [groupName('env', environment)] : []),
      ...(typeof family === 'string' ? [groupName('os', family)] : []),
      ...(typeof role === 'string' ? [groupName('role', role)] : []),
    ];
    hosts.push({ name: certname, vars, groups });
  });
  if (!hosts.length) throw malformed('nodes', 'holds no active node');
  const name = options.name ?? 'PuppetDB nodes';
  return {
    format: 'manifest',
    objects: [
      {
        kind: 'inventory',
        external_id: `fleet/${name}`,
        name,
        source: 'body',
        draft: { name, content: fleetInventory(hosts, new Map()), format: 'yaml' },
        notes: [`${hosts.length} nodes; facts are not carried beyond the address, environment, OS family and role they group by`],
      },
    ],
    left_out: leftOut,
  };
}

function path(value: unknown, key: string): unknown {
  return isObject(value) ? (value as Json)[key] : undefined;
}
