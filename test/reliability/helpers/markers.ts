/** Prompt markers of the fault server: its worker exits, throws, or hangs on them, and its handler throws on poison. */
export const MARKERS = { exit: '__exit__', throw: '__throw__', hang: '__hang__', poison: '__poison__' } as const;
