import { DOMParser } from '@xmldom/xmldom';
import { malformed } from './plan';

/**
 * Reading the XML of an export (Rundeck's job XML, Jenkins's config.xml): a strict parse (any
 * error or warning is a 400 naming the file), and small helpers over elements. xmldom reads no
 * DTD and loads no external entity, so an export cannot reach a file or the network, nor expand
 * an entity into more text than it holds.
 */

export type XmlElement = Element;

/** The document element of `text`, read from the file named `file`. */
export function parseXml(text: string, file: string): XmlElement {
  const problems: string[] = [];
  const report = (message: string) => problems.push(message.replace(/^\[xmldom \w+\]\s*/, '').split('\n')[0]);
  let doc: Document;
  try {
    doc = new DOMParser({ errorHandler: { warning: report, error: report, fatalError: report } }).parseFromString(text, 'text/xml');
  } catch (err) {
    throw malformed(file, `is not well-formed XML: ${(err as Error).message.split('\n')[0]}`);
  }
  if (problems.length || !doc?.documentElement) throw malformed(file, `is not well-formed XML: ${problems[0] ?? 'it holds no element'}`);
  return doc.documentElement;
}

/** The element children of `element`, of one tag name when given. */
export function elements(element: XmlElement | null | undefined, name?: string): XmlElement[] {
  if (!element) return [];
  const out: XmlElement[] = [];
  for (let node = element.firstChild; node; node = node.nextSibling) {
    if (node.nodeType === 1 && (name === undefined || (node as XmlElement).tagName === name)) out.push(node as XmlElement);
  }
  return out;
}

/** The first element child of that name, or null. */
export const child = (element: XmlElement | null | undefined, name: string): XmlElement | null => elements(element, name)[0] ?? null;

/** An element's text (its text and CDATA children, joined), or null when absent. */
export function textOf(element: XmlElement | null | undefined): string | null {
  if (!element) return null;
  let text = '';
  for (let node = element.firstChild; node; node = node.nextSibling) {
    if (node.nodeType === 3 || node.nodeType === 4) text += node.nodeValue ?? '';
  }
  return text;
}

/** The text of the first child of that name, trimmed; null when absent or blank. */
export function childText(element: XmlElement | null | undefined, name: string): string | null {
  const text = textOf(child(element, name));
  return text === null || text.trim() === '' ? null : text.trim();
}

/** An attribute's value, or null when absent. */
export const attr = (element: XmlElement | null | undefined, name: string): string | null => (element && element.hasAttribute(name) ? element.getAttribute(name) : null);
