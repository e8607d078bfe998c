import yauzl from 'yauzl';
import { decodeJsonBytes } from '../core/json-scan';
import { badRequest, DomainError } from '../core/errors';
import { isZip, type ExportFiles } from '../core/imports/export-files';

/**
 * The body of a `jobsched` or `ciserver` import (spec part A 4.14 rule 3) as files: its text, or
 * the files of the zip archive it is, told apart by content (the zip signature), never by name or
 * content type. An archive is read with yauzl, in memory, and refused with 400 naming the body
 * when it is unsafe:
 *
 * - a path that is absolute, climbs out (`..`), or holds a backslash (path traversal), checked by
 *   yauzl on every entry, even those not read;
 * - more than ARCHIVE_LIMITS.entries entries, an entry over ARCHIVE_LIMITS.entryBytes or all the
 *   entries read over ARCHIVE_LIMITS.totalBytes uncompressed (a zip bomb): the sizes an entry
 *   declares are checked before it is inflated, and yauzl stops an entry that inflates past the
 *   size it declared;
 * - an encrypted entry, or one yauzl cannot read.
 *
 * Only the entries `wanted` picks are inflated.
 */

export const ARCHIVE_LIMITS = { entries: 10_000, entryBytes: 25 * 1024 * 1024, totalBytes: 100 * 1024 * 1024 } as const;

const refused = (message: string) => badRequest(`body: ${message}`, { field: 'body' });

export async function exportFilesOf(bytes: Buffer, wanted: (path: string) => boolean): Promise<ExportFiles> {
  if (!isZip(bytes)) return { archive: false, files: [{ path: 'body', text: decodeJsonBytes(bytes) }] };
  let zip: yauzl.ZipFile;
  try {
    zip = await yauzl.fromBufferPromise(bytes, { lazyEntries: true, strictFileNames: true, validateEntrySizes: true });
  } catch (err) {
    throw refused(`the zip archive cannot be read: ${(err as Error).message}`);
  }
  if (zip.entryCount > ARCHIVE_LIMITS.entries) throw refused(`the zip archive holds ${zip.entryCount} entries, more than the ${ARCHIVE_LIMITS.entries} an import reads`);
  const files: ExportFiles['files'] = [];
  let total = 0;
  try {
    for await (const entry of zip.eachEntry()) {
      if (entry.fileName.endsWith('/') || !wanted(entry.fileName)) continue;
      if (entry.isEncrypted()) throw refused(`${entry.fileName} is encrypted`);
      if (entry.uncompressedSize > ARCHIVE_LIMITS.entryBytes) throw refused(`${entry.fileName} inflates to ${entry.uncompressedSize} bytes, more than the ${ARCHIVE_LIMITS.entryBytes} an import reads from one file`);
      total += entry.uncompressedSize;
      if (total > ARCHIVE_LIMITS.totalBytes) throw refused(`the files read from the zip archive inflate to more than the ${ARCHIVE_LIMITS.totalBytes} bytes an import reads`);
      const chunks: Buffer[] = [];
      for await (const chunk of await zip.openReadStreamPromise(entry)) chunks.push(chunk as Buffer);
      files.push({ path: entry.fileName, text: decodeJsonBytes(Buffer.concat(chunks)) });
    }
  } catch (err) {
    if (err instanceof DomainError) throw err;
    throw refused(`the zip archive cannot be read: ${(err as Error).message}`);
  } finally {
    zip.close();
  }
  return { archive: true, files };
}
