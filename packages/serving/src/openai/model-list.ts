/**
 * One model as OpenAI's `GET /v1/models` lists it.
 *
 * @example
 * ```ts
 * const model: ModelObject = { id: 'tinystories-656k', object: 'model', created: 1700000000, owned_by: 'microbatch' };
 * ```
 */
export interface ModelObject {
  readonly id: string;
  readonly object: 'model';
  /** When the server started serving it, in seconds since the epoch. */
  readonly created: number;
  readonly owned_by: string;
}

/** OpenAI's `GET /v1/models` answer. */
export interface ModelList {
  readonly object: 'list';
  readonly data: readonly ModelObject[];
}

/**
 * The body of `GET /v1/models` for a server serving one model (what `client.models.list()` reads).
 *
 * @example
 * ```ts
 * modelList('tinystories-656k', new Date()); // { object: 'list', data: [{ id: 'tinystories-656k', object: 'model', ... }] }
 * ```
 */
export function modelList(id: string, servingSince: Date): ModelList {
  return {
    object: 'list',
    data: [{ id, object: 'model', created: Math.floor(servingSince.getTime() / 1_000), owned_by: 'microbatch' }],
  };
}
