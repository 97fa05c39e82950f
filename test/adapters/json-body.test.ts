// Issue 16, bodies: the same line on Express, Koa and Nest (on Express), through real servers, with each adapter's
// `jsonBody` and core's server limits, as the serving apps use them.
import 'reflect-metadata';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { JSON_BODY_LIMIT, applyServerLimits } from '@microbatch/core/http';
import { afterEach, describe, expect, it } from 'vitest';
import { type Echo, FRAMEWORKS } from './echo-apps.js';
import { unsupportedEncodingMessage } from './encodings.js';

let running: Echo | undefined;
afterEach(async () => {
  await running?.close();
  running = undefined;
});

const error = (code: string, message: string, details?: object) => ({
  error: details === undefined ? { code, message } : { code, message, details },
});
const TOO_LARGE = error('ITEM_TOO_LARGE', `The request body is larger than the limit of ${JSON_BODY_LIMIT} bytes`, {
  limit: JSON_BODY_LIMIT,
});

/** Sends raw bytes on a fresh connection and resolves with everything the server sent back until it closed or `until` matched. */
function rawExchange(url: string, bytes: string | Buffer, until: RegExp): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let received = '';
    socket.on('error', reject);
    socket.on('data', (chunk) => {
      received += chunk.toString('latin1');
      if (until.test(received)) {
        socket.destroy();
        resolve(received);
      }
    });
    socket.on('close', () => resolve(received));
    socket.write(bytes);
  });
}

describe.each(FRAMEWORKS)('JSON bodies on %s', (name, start) => {
  async function post(
    body: string | Buffer,
    headers: Record<string, string>,
    chunked = false,
  ): Promise<{ status: number; body: unknown; text: string }> {
    running ??= await start();
    // A stream body has no Content-Length: fetch sends it chunked.
    const payload = chunked ? new Blob([body]).stream() : body;
    const response = await fetch(`${running.url}/echo`, { method: 'POST', headers, body: payload, duplex: 'half' });
    const text = await response.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = text;
    }
    return { status: response.status, body: parsed, text };
  }

  it('refuses what is not UTF-8 JSON with 415 before the model sees it: form posts, text, other charsets and encodings', async () => {
    const json = '{"prompt": "hi"}';
    const cases: Array<[Record<string, string>, string]> = [
      [
        { 'content-type': 'application/x-www-form-urlencoded' },
        'Expected a JSON body with Content-Type: application/json',
      ],
      [
        { 'content-type': 'multipart/form-data; boundary=x' },
        'Expected a JSON body with Content-Type: application/json',
      ],
      [{ 'content-type': 'text/plain' }, 'Expected a JSON body with Content-Type: application/json'],
      [{ 'content-type': 'application/json; charset=latin1' }, 'Unsupported charset: send the JSON body as UTF-8'],
      [{ 'content-type': 'application/json; charset=utf-16' }, 'Unsupported charset: send the JSON body as UTF-8'],
      [{ 'content-type': 'application/json', 'content-encoding': 'x-unknown' }, unsupportedEncodingMessage(name)],
    ];
    for (const [headers, message] of cases) {
      const answer = await post(json, headers);
      // The headers are part of the compared value, so a failure names the case.
      expect([headers, answer.status, answer.body]).toEqual([headers, 415, error('UNSUPPORTED_MEDIA_TYPE', message)]);
    }
    expect(running?.bodies).toEqual([]);
  });

  it('answers 400 with fixed messages that never quote the body: bad JSON, bytes that do not match their encoding', async () => {
    const malformed = await post('{"prompt": NOT-JSON-SECRET}', { 'content-type': 'application/json' });
    const notGzip = await post('{"prompt": "hi"}', { 'content-type': 'application/json', 'content-encoding': 'gzip' });
    const gzipped = await post(gzipSync('{"prompt": "hi"}'), {
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    });

    expect([malformed.status, malformed.body]).toEqual([
      400,
      error('INVALID_INPUT', 'The request body is not valid JSON'),
    ]);
    expect(malformed.text).not.toMatch(/SECRET|NOT-JSON|Unexpected token/);
    expect([notGzip.status, notGzip.body]).toEqual([
      400,
      error('INVALID_INPUT', 'The request body does not match its Content-Encoding'),
    ]);
    expect([gzipped.status, gzipped.body]).toEqual([200, 'ok']);
    expect(running?.bodies).toEqual([{ prompt: 'hi' }]);
  });

  it(`has the same limit, ${JSON_BODY_LIMIT} bytes, as sent, chunked and inflated`, async () => {
    const fits = JSON.stringify({ prompt: 'a'.repeat(JSON_BODY_LIMIT - 20) });
    const over = JSON.stringify({ prompt: 'a'.repeat(JSON_BODY_LIMIT) });
    const fitting = await post(fits, { 'content-type': 'application/json' });
    const tooLong = await post(over, { 'content-type': 'application/json' });
    const chunked = await post(over, { 'content-type': 'application/json' }, true);
    const bomb = await post(gzipSync(JSON.stringify({ prompt: 'a'.repeat(5_000_000) })), {
      'content-type': 'application/json',
      'content-encoding': 'gzip',
    });

    expect(fitting.status).toBe(200);
    expect([tooLong.status, tooLong.body]).toEqual([413, TOO_LARGE]);
    expect([chunked.status, chunked.body]).toEqual([413, TOO_LARGE]);
    expect([bomb.status, bomb.body]).toEqual([413, TOO_LARGE]);
    expect(running?.bodies).toHaveLength(1);
  });

  it('refuses an announced oversize body with 413 before reading it', async () => {
    running ??= await start();
    // 200 MB announced, none sent: a server that read the body first would never answer.
    const head =
      'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200000000\r\n\r\n';
    const answer = await rawExchange(running.url, head, /\r\n\r\n[\s\S]*\}\}$/);
    expect(answer).toMatch(/^HTTP\/1\.1 413 /);
    expect(answer).toContain(JSON.stringify(TOO_LARGE));
  });

  it('answers `Expect: 100-continue` for an oversize body with 413 instead of 100 Continue (with the server limits)', async () => {
    running ??= await start();
    applyServerLimits(running.server);
    const oversize =
      'POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 200000000\r\nExpect: 100-continue\r\n\r\n';
    const refused = await rawExchange(running.url, oversize, /\r\n\r\n[\s\S]*\}\}$/);
    expect(refused).toMatch(/^HTTP\/1\.1 413 /);
    expect(refused).not.toContain('100 Continue');
    expect(refused).toContain(JSON.stringify(TOO_LARGE));

    const body = '{"prompt": "hi"}';
    const fitting = `POST /echo HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n`;
    const { hostname, port } = new URL(running.url);
    const answered = await new Promise<string>((resolve, reject) => {
      const socket = connect(Number(port), hostname);
      let received = '';
      socket.on('error', reject);
      socket.on('data', (chunk) => {
        received += chunk.toString();
        // The body goes only once the server said 100 Continue.
        if (received.startsWith('HTTP/1.1 100 Continue\r\n\r\n') && !socket.writableEnded) socket.end(body);
      });
      socket.on('close', () => resolve(received));
      socket.write(fitting);
    });
    expect(answered).toMatch(/^HTTP\/1\.1 100 Continue\r\n\r\nHTTP\/1\.1 200 /);
    expect(running.bodies).toEqual([{ prompt: 'hi' }]);
  });
});
