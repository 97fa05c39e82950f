// A generation request as one trace: with an SDK registered (an in-memory exporter) and the request under a server
// span (what an app's HTTP instrumentation makes), the request span shows its queue wait, its first token and its
// token counts, and the batch span that served it links to it.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { context, trace } from '@opentelemetry/api';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { createBatcher, createStreamingBatcher, END } from '@microbatch/core';
import { otelTracer } from '@microbatch/core/otel';
import type { TextGenerationChunk, TextGenerationInput, TextGenerationOutput } from '@microbatch/inference';
import { createTextGenerationParser } from '@microbatch/inference';
import { afterAll, beforeAll, expect, it } from 'vitest';
import { type CompletionsModel, createCompletionsEndpoint } from '../src/index.js';

const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
let server: Server | undefined;

beforeAll(() => {
  provider.register();
});
afterAll(async () => {
  server?.closeAllConnections();
  await new Promise((resolve) => server?.close(resolve) ?? resolve(undefined));
  await provider.shutdown();
  trace.disable();
  context.disable();
});

it("shows a streamed request's queue wait, first token and token counts on its span, linked from its batch", async () => {
  const usage = { prompt_tokens: 5, completion_tokens: 2, total_tokens: 7 };
  const streamer = createStreamingBatcher(
    async function* (inputs: TextGenerationInput[]) {
      yield inputs.map((): TextGenerationChunk => ({ text: 'a', finish_reason: null, usage: null }));
      yield inputs.map((): TextGenerationChunk => ({ text: 'b', finish_reason: 'length', usage }));
      yield inputs.map(() => END);
    },
    { name: 'stream', tracer: otelTracer() },
  );
  // Not called: the request is streamed.
  const generate = createBatcher(
    async (inputs: TextGenerationInput[]): Promise<TextGenerationOutput[]> =>
      inputs.map(() => ({ text: '', finish_reason: 'length', usage })),
    { name: 'generate' },
  );
  const model: CompletionsModel = { id: 'fake-model', generate, streamer, validate: createTextGenerationParser() };
  const completions = createCompletionsEndpoint(model);
  const tracer = trace.getTracer('http-instrumentation');
  const listening = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on('end', () => {
      void tracer.startActiveSpan('POST /v1/completions', (span) =>
        completions(JSON.parse(body), res).finally(() => span.end()),
      );
    });
  });
  server = listening;
  await new Promise<void>((resolve) => listening.listen(0, '127.0.0.1', resolve));
  const url = `http://127.0.0.1:${(listening.address() as AddressInfo).port}/v1/completions`;
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ model: 'fake-model', prompt: 'Once', max_tokens: 2, stream: true }),
  });
  expect(await response.text()).toContain('[DONE]');
  // The server span ends once the endpoint's promise settles, just after the response's last byte.
  while (!exporter.getFinishedSpans().some((span) => span.name === 'POST /v1/completions'))
    await new Promise((resolve) => setTimeout(resolve, 5));
  const spans = exporter.getFinishedSpans();
  const request = spans.find((span) => span.name === 'POST /v1/completions');
  expect(request?.events.map((event) => event.name)).toEqual([
    'microbatch.dispatched',
    'gen_ai.first_token',
    'microbatch.prefill',
    'microbatch.decode',
  ]);
  const [dispatched, first, prefill, decode] = (request?.events ?? []).map((event) => event.attributes ?? {});
  expect(typeof dispatched?.['microbatch.queue_time_ms']).toBe('number');
  const ttft = first?.['gen_ai.server.time_to_first_token'] as number;
  expect(ttft).toBeGreaterThan(0);
  // Prefill is the part of the time to first token after the dispatch.
  const prefillSeconds = prefill?.['microbatch.prefill_time_seconds'] as number;
  expect(prefillSeconds).toBeGreaterThanOrEqual(0);
  expect(prefillSeconds).toBeLessThanOrEqual(ttft);
  // Decode: from the first token to the last; 2 tokens, so one token after the first takes all of it.
  const decodeSeconds = decode?.['microbatch.decode_time_seconds'] as number;
  expect(decodeSeconds).toBeGreaterThanOrEqual(0);
  expect(decode?.['gen_ai.usage.output_tokens']).toBe(2);
  expect(decode?.['gen_ai.server.time_per_output_token']).toBe(decodeSeconds);
  expect(request?.attributes).toMatchObject({
    'gen_ai.operation.name': 'text_completion',
    'gen_ai.request.model': 'fake-model',
    'gen_ai.usage.input_tokens': 5,
    'gen_ai.usage.output_tokens': 2,
  });
  const batch = spans.find((span) => span.name === 'microbatch.batch stream');
  expect(batch?.links.map((link) => link.context.spanId)).toEqual([request?.spanContext().spanId]);
  const wait = spans.find((span) => span.name === 'microbatch.wait stream');
  expect(wait?.parentSpanContext?.spanId).toBe(request?.spanContext().spanId);
});
