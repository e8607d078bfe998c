import { temporal } from '@temporalio/proto';

const History = temporal.api.history.v1.History;
const AS_JSON = { longs: String, enums: String, bytes: String } as const;

/**
 * A history as plain JSON (protobufjs object form: camelCase fields, enum names, 64-bit numbers as
 * strings, bytes and payloads as base64) and back. The SDK's own historyToJSON / historyFromJSON
 * refuse to work when npm installs two copies of protobufjs side by side (their `instanceof`
 * checks fail across the copies), so the generated codec is used instead.
 */
export function historyToPlain(history: temporal.api.history.v1.IHistory): unknown {
  return History.toObject(History.fromObject(history), AS_JSON);
}

export function historyFromPlain(plain: unknown): temporal.api.history.v1.IHistory {
  return History.fromObject(plain as Record<string, unknown>);
}
