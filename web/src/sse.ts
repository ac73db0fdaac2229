// Server-Sent Events, read with fetch so the bearer token stays in a header
// (EventSource cannot send one). SSEParser is the pure part: bytes in,
// messages out, per the WHATWG event-stream rules the server relies on
// (`id:` is the event's seq, `data:` one JSON line, `event: end` closes).

export interface SSEMessage {
  /** The message's `event:` field; "message" when absent. */
  event: string;
  data: string;
  /** The `id:` field of this message, if it had one. */
  id?: string;
  /** A `retry:` field seen in this block, in milliseconds. */
  retry?: number;
}

export class SSEParser {
  private buffer = '';
  private eventType = '';
  private data: string[] = [];
  private id: string | undefined;
  private retry: number | undefined;
  private sawField = false;

  /** Feeds decoded text; returns the messages it completed. */
  push(chunk: string): SSEMessage[] {
    this.buffer += chunk;
    const out: SSEMessage[] = [];
    for (;;) {
      const m = /\r\n|\r|\n/.exec(this.buffer);
      if (!m) break;
      // A lone \r at the very end may be the first half of \r\n.
      if (m[0] === '\r' && m.index === this.buffer.length - 1) break;
      const line = this.buffer.slice(0, m.index);
      this.buffer = this.buffer.slice(m.index + m[0].length);
      const msg = this.line(line);
      if (msg) out.push(msg);
    }
    return out;
  }

  private line(line: string): SSEMessage | undefined {
    if (line === '') return this.dispatch();
    if (line.startsWith(':')) return undefined; // comment (keep-alive)
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.startsWith(' ')) value = value.slice(1);
    switch (field) {
      case 'event':
        this.eventType = value;
        this.sawField = true;
        break;
      case 'data':
        this.data.push(value);
        this.sawField = true;
        break;
      case 'id':
        if (!value.includes('\0')) this.id = value;
        this.sawField = true;
        break;
      case 'retry':
        if (/^\d+$/.test(value)) this.retry = Number(value);
        this.sawField = true;
        break;
    }
    return undefined;
  }

  private dispatch(): SSEMessage | undefined {
    const hadData = this.data.length > 0;
    const msg: SSEMessage = { event: this.eventType || 'message', data: this.data.join('\n') };
    if (this.id !== undefined) msg.id = this.id;
    if (this.retry !== undefined) msg.retry = this.retry;
    const any = this.sawField;
    this.eventType = '';
    this.data = [];
    this.id = undefined;
    this.retry = undefined;
    this.sawField = false;
    if (hadData) return msg;
    // A block with only retry: still tells the client something.
    if (any && msg.retry !== undefined) return { event: '', data: '', retry: msg.retry };
    return undefined;
  }
}
