import { canonicalJson } from '../audit/canonical';
import { sha256Hex } from '../sha256';

/** The execution settings an approval binds to (spec part A 2.10: "an approval binds to the run's spec digest"). */
export interface ExecutionSettings {
  tool: string;
  spec: object;
  queue: string;
  timeout_seconds: number;
}

/**
 * `sha256:` + hex SHA-256 of the RFC 8785 canonical JSON of the settings. The spec carries the
 * fact cache setting (`fact_cache`, core/facts.ts) and the change label (`change`) when a run has
 * them, so an approval binds to both; a run without them keeps the digest it always had. An approver decides
 * against the digest they were shown; a run whose settings differ has a different digest.
 */
export function stateDigest(settings: ExecutionSettings): string {
  const { tool, spec, queue, timeout_seconds } = settings;
  return 'sha256:' + sha256Hex(canonicalJson({ tool, spec, queue, timeout_seconds }));
}
