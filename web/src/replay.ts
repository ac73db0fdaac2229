// The replay report's wording: verdict chips, the changes of one run and
// the summary line, kept apart from the page so they are tested alone. The
// words match `weft replay`'s table.

import type { Replay, ReplayRun, Verdict } from './types';

/** Verdicts in the order the summary counts them. */
export const VERDICTS: Exclude<Verdict, ''>[] = ['same', 'output-changed', 'path-changed', 'now-fails', 'now-succeeds', 'not-replayable'];

/** Whether the run would behave differently under the draft. */
export function isChanged(v: Verdict): boolean {
  return v === 'output-changed' || v === 'path-changed' || v === 'now-fails' || v === 'now-succeeds';
}

/** The chip of a verdict: its text (the API's word) and a tone for its colour. */
export function verdictChip(v: Verdict): { text: string; tone: 'same' | 'changed' | 'fails' | 'skipped' | 'pending' } {
  switch (v) {
    case '':
      return { text: 'pending', tone: 'pending' };
    case 'same':
      return { text: v, tone: 'same' };
    case 'not-replayable':
      return { text: v, tone: 'skipped' };
    case 'now-fails':
      return { text: v, tone: 'fails' };
    default:
      return { text: v, tone: 'changed' };
  }
}

/** How many items of one kind a run's changes list. */
const MAX_ITEMS = 3;

function bounded(items: string[]): string {
  if (items.length <= MAX_ITEMS) return items.join(', ');
  return `${items.slice(0, MAX_ITEMS).join(', ')} (+${items.length - MAX_ITEMS} more)`;
}

function shown(v: unknown): string {
  const s = v === undefined ? 'null' : JSON.stringify(v);
  return s.length > 30 ? `${s.slice(0, 30)}…` : s;
}

/**
 * A run's changes as separate parts: nodes whose outcome changed, output
 * paths that differ, unrecorded nodes; a not-replayable run's reason.
 */
export function changeParts(run: ReplayRun): string[] {
  if (run.verdict === 'not-replayable') return [run.reason || 'not replayable'];
  const d = run.diff;
  if (!d) return [];
  const parts: string[] = [];
  if (d.nodes?.length) parts.push(`nodes ${bounded(d.nodes.map((n) => `${n.nodeId} ${n.recorded || '-'}→${n.simulated || '-'}`))}`);
  if (d.output?.length) {
    const items = d.output.map((op) => {
      const path = op.path || '(whole output)';
      if (op.op === 'add') return `${path} +${shown(op.to)}`;
      if (op.op === 'remove') return `${path} -${shown(op.from)}`;
      return `${path} ${shown(op.from)}→${shown(op.to)}`;
    });
    parts.push(`output ${bounded(items)}${d.truncated ? ' (cut: the runs have the outputs whole)' : ''}`);
  }
  if (d.unrecorded?.length) parts.push(`unrecorded ${bounded(d.unrecorded)}`);
  return parts;
}

/** The replay's runs counted by verdict, e.g. "4 same, 1 path-changed". */
export function summaryText(r: Replay): string {
  const counts = new Map<Verdict, number>();
  for (const run of r.runs ?? []) counts.set(run.verdict, (counts.get(run.verdict) ?? 0) + 1);
  const parts = VERDICTS.filter((v) => counts.get(v)).map((v) => `${counts.get(v)} ${v}`);
  if (counts.get('')) parts.push(`${counts.get('')} pending`);
  return parts.length ? parts.join(', ') : 'no runs';
}

/** How many runs would change under the draft. */
export function changedCount(r: Replay): number {
  return (r.runs ?? []).filter((run) => isChanged(run.verdict)).length;
}

/**
 * A list item's outcome from its summary (list items carry no runs):
 * "running", "2 would change", "nothing changes".
 */
export function outcomeText(r: Replay): { text: string; tone: 'same' | 'changed' | 'pending' } {
  if (r.status !== 'done') return { text: 'running', tone: 'pending' };
  const s = r.summary;
  const changed = s.outputChanged + s.pathChanged + s.nowFails + s.nowSucceeds;
  return changed ? { text: `${changed} would change`, tone: 'changed' } : { text: 'nothing changes', tone: 'same' };
}
