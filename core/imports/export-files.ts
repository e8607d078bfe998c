/**
 * The files of an export that is not one JSON document (the `jobsched` and `ciserver` formats,
 * spec part A 4.14 rule 3): the body's text, or the files of a zip archive it holds, each read
 * as UTF-8 (services/import-archives.ts opens archives). A byte that is not UTF-8 is kept as a
 * lone surrogate (core/json-scan.ts decodeJsonBytes), so the plan check names the object and
 * field it lands in (core/imports/plan.ts requireCleanText).
 */
export interface ExportFile {
  /** Its path in the archive; `body` for a body that is the file itself. */
  path: string;
  text: string;
}

export interface ExportFiles {
  /** Whether the body was a zip archive. */
  archive: boolean;
  files: ExportFile[];
}

/** Whether the bytes are a zip archive: a local file header or, for an empty one, the end record. */
export function isZip(bytes: Uint8Array): boolean {
  return bytes.length >= 4 && bytes[0] === 0x50 && bytes[1] === 0x4b && ((bytes[2] === 3 && bytes[3] === 4) || (bytes[2] === 5 && bytes[3] === 6));
}
