// auth/: who may call the serving apps and who a request is: API keys (checked in constant time, replaceable as a
// whole), the request's principal (the key's name) for whatever scopes by caller, and the routes' key check that
// every framework's app runs.
export { ApiKeys, defaultKeyName, parseApiKeyFile, toApiKeys } from './api-keys.js';
export type { ApiKeyEntry, ApiKeyInput } from './api-keys.js';
export { prefixCacheTenant, principalOf } from './principal.js';
export type { Principal } from './principal.js';
export { apiKeyClientKey, guardHandlers, keyCheck } from './route-guard.js';
export type { GuardedHandlers } from './route-guard.js';
