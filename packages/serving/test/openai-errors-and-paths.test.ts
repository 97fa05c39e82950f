// The five frameworks' serving apps agree where they must be one: the same bad body sent to each `/v1/*` endpoint
// (completions, chat, embeddings) gets OpenAI's error object with the same status, code and `param` everywhere, as do
// bodies refused before an endpoint (malformed JSON, a wrong media type) and unknown routes under `/v1/`; and paths
// that differ from a route only by case or a trailing slash get the same status on all five (routing is strict, as
// Fastify's and OpenAI's: 404).
import { createBatcher } from '@microbatch/core';
import type { OnnxInput, OnnxOutput } from '@microbatch/inference';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { EmbeddingService, RunningServer } from '../src/index.js';
import * as express from '../src/app/express/index.js';
import * as fastify from '../src/app/fastify/index.js';
import * as hono from '../src/app/hono/index.js';
import * as koa from '../src/app/koa/index.js';
import * as nest from '../src/app/nest/index.js';
import { gatedService } from './gated-service.js';

const FRAMEWORKS = { express, koa, fastify, hono, nest } as const;
type Framework = keyof typeof FRAMEWORKS;
const WHERE = { port: 0, host: '127.0.0.1' } as const;

/** An embedding service whose model is never reached: every request here is refused before it. */
function embeddingService(): EmbeddingService {
  const batcher = createBatcher<OnnxInput, OnnxOutput>(
    () => Promise.reject(new Error('the model must not be reached')),
    { name: 'embed' },
  );
  return {
    id: 'fake-embeddings',
    dimensions: 4,
    maxTokens: 16,
    vocabSize: 100,
    pooling: 'mean',
    normalize: true,
    truncatableDimensions: false,
    batcher,
    batchers: [batcher],
    ready: Promise.resolve(),
    isReady: () => true,
    tokenize: (text) => Array.from(text, (char) => char.charCodeAt(0) % 100),
    encodeAll: (texts) => Promise.resolve(texts.map((text) => Array.from(text, (char) => char.charCodeAt(0) % 100))),
    embed: () => Promise.reject(new Error('the model must not be reached')),
    embedAll: () => Promise.reject(new Error('the model must not be reached')),
    drain: () => batcher.close(),
    close: () => batcher.close(),
  };
}

interface Answer {
  readonly status: number;
  readonly allow: string | null;
  readonly body: unknown;
}

async function send(url: string, method: string, body?: string, type = 'application/json'): Promise<Answer> {
  const response = await fetch(url, {
    method,
    ...(body === undefined ? {} : { body, headers: { 'content-type': type } }),
  });
  const text = await response.text();
  let parsed: unknown = text;
  try {
    parsed = JSON.parse(text);
  } catch {
    // Not JSON: kept as text, which no expectation below accepts.
  }
  return { status: response.status, allow: response.headers.get('allow'), body: parsed };
}

/** OpenAI's error object, exactly: `message`, `type`, `param`, `code`, and microbatch's `details` at most. */
function openAiError(type: string, code: string, param: string | null) {
  return {
    error: expect.toSatisfy(
      (error: Record<string, unknown>) =>
        Object.keys(error).every((key) => ['message', 'type', 'param', 'code', 'details'].includes(key)) &&
        typeof error.message === 'string' &&
        error.message !== '' &&
        error.type === type &&
        error.param === param &&
        error.code === code,
      `{ message, type: ${type}, param: ${String(param)}, code: ${code} }`,
    ),
  };
}

// Each endpoint with the field its `{}` lacks (OpenAI's `param`).
const ENDPOINTS = [
  { app: 'text', path: '/v1/completions', missing: 'prompt' },
  { app: 'text', path: '/v1/chat/completions', missing: 'messages' },
  { app: 'embeddings', path: '/v1/embeddings', missing: 'input' },
] as const;

const running: Partial<Record<Framework, { text: RunningServer; embeddings: RunningServer }>> = {};

beforeAll(async () => {
  for (const framework of Object.keys(FRAMEWORKS) as Framework[]) {
    const { startTextCompletionApp, startEmbeddingsApp } = FRAMEWORKS[framework];
    running[framework] = {
      text: await startTextCompletionApp(gatedService({}).service, WHERE),
      embeddings: await startEmbeddingsApp(embeddingService(), WHERE),
    };
  }
});

afterAll(async () => {
  for (const servers of Object.values(running)) {
    for (const server of [servers.text, servers.embeddings]) {
      server.server.closeAllConnections();
      await server.shutdown();
    }
  }
});

describe.each(Object.keys(FRAMEWORKS) as Framework[])('the %s serving apps', (framework) => {
  const url = (app: 'text' | 'embeddings', path: string) => `${running[framework]![app].url}${path}`;

  it.each(ENDPOINTS)('answer the same bad bodies on $path with OpenAI errors', async ({ app, path, missing }) => {
    const answers = {
      empty: await send(url(app, path), 'POST', '{}'),
      malformed: await send(url(app, path), 'POST', '{"'),
      array: await send(url(app, path), 'POST', '[1]'),
      text: await send(url(app, path), 'POST', 'hello', 'text/plain'),
    };
    expect(answers).toEqual({
      empty: { status: 400, allow: null, body: openAiError('invalid_request_error', 'INVALID_INPUT', missing) },
      malformed: { status: 400, allow: null, body: openAiError('invalid_request_error', 'INVALID_INPUT', null) },
      array: { status: 400, allow: null, body: openAiError('invalid_request_error', 'INVALID_INPUT', 'body') },
      text: { status: 415, allow: null, body: openAiError('invalid_request_error', 'UNSUPPORTED_MEDIA_TYPE', null) },
    });
  });

  it('answers an unknown /v1/ route (404) and a known one with another method (405) with OpenAI errors', async () => {
    const answers = {
      unknown: await send(url('text', '/v1/nope'), 'GET'),
      method: await send(url('text', '/v1/completions'), 'GET'),
      embeddingsMethod: await send(url('embeddings', '/v1/embeddings'), 'GET'),
    };
    expect(answers).toEqual({
      unknown: { status: 404, allow: null, body: openAiError('invalid_request_error', 'NOT_FOUND', null) },
      method: { status: 405, allow: 'POST', body: openAiError('invalid_request_error', 'METHOD_NOT_ALLOWED', null) },
      embeddingsMethod: {
        status: 405,
        allow: 'POST',
        body: openAiError('invalid_request_error', 'METHOD_NOT_ALLOWED', null),
      },
    });
  });

  it('routes strictly: a trailing slash or other letter case is a 404, the exact path a 200', async () => {
    const statuses: Record<string, number> = {};
    for (const app of ['text', 'embeddings'] as const) {
      for (const path of ['/healthz', '/healthz/', '/HEALTHZ', '/v1/models', '/v1/models/', '/V1/MODELS']) {
        statuses[`${app} ${path}`] = (await send(url(app, path), 'GET')).status;
      }
    }
    expect(statuses).toEqual({
      'text /healthz': 200,
      'text /healthz/': 404,
      'text /HEALTHZ': 404,
      'text /v1/models': 200,
      'text /v1/models/': 404,
      'text /V1/MODELS': 404,
      'embeddings /healthz': 200,
      'embeddings /healthz/': 404,
      'embeddings /HEALTHZ': 404,
      'embeddings /v1/models': 200,
      'embeddings /v1/models/': 404,
      'embeddings /V1/MODELS': 404,
    });
  });
});
