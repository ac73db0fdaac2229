import { describe, expect, it } from 'vitest';
import { SSEParser } from './sse';

describe('SSEParser', () => {
  it('parses the stream the API writes, across arbitrary chunk boundaries', () => {
    const wire =
      'retry: 2000\n\n' +
      'id: 1\ndata: {"seq":1,"type":"run.started"}\n\n' +
      ': keep-alive\n\n' +
      'id: 2\ndata: {"seq":2,"type":"node.started"}\n\n' +
      'event: end\ndata: {"status":"succeeded","lastSeq":2}\n\n';
    for (const size of [1, 2, 3, 7, 64, wire.length]) {
      const p = new SSEParser();
      const got = [];
      for (let i = 0; i < wire.length; i += size) got.push(...p.push(wire.slice(i, i + size)));
      expect(got).toEqual([
        { event: '', data: '', retry: 2000 },
        { event: 'message', data: '{"seq":1,"type":"run.started"}', id: '1' },
        { event: 'message', data: '{"seq":2,"type":"node.started"}', id: '2' },
        { event: 'end', data: '{"status":"succeeded","lastSeq":2}' },
      ]);
    }
  });

  it('follows the field rules: CRLF, multi-line data, no space after the colon, unknown fields', () => {
    const p = new SSEParser();
    const got = p.push('data:a\r\ndata: b\r\nfoo: bar\r\nid:7\r\n\r\n');
    expect(got).toEqual([{ event: 'message', data: 'a\nb', id: '7' }]);
  });

  it('keeps an incomplete message until its blank line arrives', () => {
    const p = new SSEParser();
    expect(p.push('id: 3\ndata: {"seq":3}\n')).toEqual([]);
    expect(p.push('\n')).toEqual([{ event: 'message', data: '{"seq":3}', id: '3' }]);
  });

  it('does not split a CRLF that arrives in two chunks into two line ends', () => {
    const p = new SSEParser();
    expect(p.push('data: x\r')).toEqual([]);
    expect(p.push('\n\r\n')).toEqual([{ event: 'message', data: 'x' }]);
  });
});
