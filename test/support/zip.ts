import { crc32, deflateRawSync } from 'node:zlib';

/**
 * Builds a zip archive in memory, for import tests: each entry deflated (or stored), with its
 * name as given, so a test can also make the archives an import must refuse (a path that climbs
 * out, a size that lies, a bomb).
 */
export interface ZipEntry {
  name: string;
  data: Buffer | string;
  /** Store without compression. */
  store?: boolean;
  /** The uncompressed size to declare, when it should lie. */
  declaredSize?: number;
}

export function zipOf(entries: ZipEntry[]): Buffer {
  const locals: Buffer[] = [];
  const centrals: Buffer[] = [];
  let offset = 0;
  for (const entry of entries) {
    const data = Buffer.isBuffer(entry.data) ? entry.data : Buffer.from(entry.data, 'utf8');
    const compressed = entry.store ? data : deflateRawSync(data);
    const name = Buffer.from(entry.name, 'utf8');
    const size = entry.declaredSize ?? data.length;
    const fields = (header: Buffer, at: number) => {
      header.writeUInt16LE(entry.store ? 0 : 8, at); // method
      header.writeUInt16LE(0, at + 2); // time
      header.writeUInt16LE(0x21, at + 4); // date: 1980-01-01
      header.writeUInt32LE(crc32(data), at + 6);
      header.writeUInt32LE(compressed.length, at + 10);
      header.writeUInt32LE(size, at + 14);
      header.writeUInt16LE(name.length, at + 18);
      header.writeUInt16LE(0, at + 20); // extra
    };
    const local = Buffer.alloc(30);
    local.writeUInt32LE(0x04034b50, 0);
    local.writeUInt16LE(20, 4);
    local.writeUInt16LE(0x0800, 6); // UTF-8 names
    fields(local, 8);
    const central = Buffer.alloc(46);
    central.writeUInt32LE(0x02014b50, 0);
    central.writeUInt16LE(20, 4);
    central.writeUInt16LE(20, 6);
    central.writeUInt16LE(0x0800, 8);
    fields(central, 10);
    central.writeUInt32LE(offset, 42);
    locals.push(local, name, compressed);
    centrals.push(central, name);
    offset += local.length + name.length + compressed.length;
  }
  const directory = Buffer.concat(centrals);
  const end = Buffer.alloc(22);
  end.writeUInt32LE(0x06054b50, 0);
  end.writeUInt16LE(entries.length, 8);
  end.writeUInt16LE(entries.length, 10);
  end.writeUInt32LE(directory.length, 12);
  end.writeUInt32LE(offset, 16);
  return Buffer.concat([...locals, directory, end]);
}
