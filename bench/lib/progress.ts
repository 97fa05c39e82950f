// The progress display: one permanent line per finished step, and on a terminal a live status line below them
// (step, live rate, elapsed and ETA) redrawn a few times a second. Without a terminal (CI logs) only the permanent
// lines are printed.

const formatDuration = (seconds: number): string => {
  const whole = Math.max(0, Math.round(seconds));
  return `${Math.floor(whole / 60)}:${String(whole % 60).padStart(2, '0')}`;
};

export class Progress {
  #total: number;
  readonly #stream: NodeJS.WriteStream;
  readonly #live: boolean;
  readonly #start = performance.now();
  #done = 0;
  #current: { label: string; weight: number } | undefined;
  #status = '';

  /** `totalWeight`: the planned seconds of every step, so the ETA holds before the first step ends. */
  constructor(totalWeight: number, stream: NodeJS.WriteStream = process.stderr) {
    this.#total = totalWeight;
    this.#stream = stream;
    this.#live = stream.isTTY === true;
  }

  get elapsedS(): number {
    return (performance.now() - this.#start) / 1000;
  }

  /** Planned seconds not yet done (the current step included). */
  get remainingS(): number {
    return Math.max(0, this.#total - this.#done);
  }

  /** Adds unplanned work (a repeated measurement) to the plan. */
  extend(weight: number): void {
    this.#total += weight;
  }

  /** Starts a step of `weight` planned seconds. */
  begin(label: string, weight: number): void {
    this.#current = { label, weight };
    this.update('');
  }

  /** Redraws the live line with `status` (e.g. the live request rate). */
  update(status: string): void {
    this.#status = status;
    if (!this.#live || this.#current === undefined) return;
    const elapsed = this.elapsedS;
    // Measured speed once some work is done (it includes process starts and noise), the plan before that.
    const pace = this.#done > 0 ? elapsed / this.#done : 1;
    const eta = Math.max(0, this.#total - this.#done) * pace;
    const percent = Math.min(100, Math.round((this.#done / this.#total) * 100));
    const line = `[${String(percent).padStart(3)}%] ${this.#current.label}${this.#status === '' ? '' : `  ${this.#status}`}  | ${formatDuration(elapsed)} elapsed, ~${formatDuration(eta)} left`;
    const width = this.#stream.columns ?? 120;
    this.#stream.write(`\r\x1b[2K${line.slice(0, width - 1)}`);
  }

  /** Ends the current step with a permanent line. */
  end(summary: string): void {
    this.#done += this.#current?.weight ?? 0;
    this.#current = undefined;
    this.log(summary);
  }

  /** A permanent line (clears the live line first). */
  log(line: string): void {
    if (this.#live) this.#stream.write('\r\x1b[2K');
    this.#stream.write(`${line}\n`);
  }
}
