import { describe, expect, it } from 'vitest';
import { changedCount, changeParts, isChanged, outcomeText, summaryText, verdictChip, VERDICTS } from './replay';
import type { Replay, ReplayRun } from './types';

const run = (r: Partial<ReplayRun>): ReplayRun => ({ runId: 'run_x', verdict: 'same', ...r });

describe('the replay report', () => {
  it('counts only real changes as changes', () => {
    expect(VERDICTS.filter(isChanged)).toEqual(['output-changed', 'path-changed', 'now-fails', 'now-succeeds']);
    expect(isChanged('')).toBe(false);
    expect(verdictChip('')).toEqual({ text: 'pending', tone: 'pending' });
    expect(verdictChip('now-fails').tone).toBe('fails');
    expect(verdictChip('path-changed')).toEqual({ text: 'path-changed', tone: 'changed' });
    expect(verdictChip('not-replayable').tone).toBe('skipped');
  });

  it('words a run\'s changes like weft replay does', () => {
    expect(
      changeParts(
        run({
          verdict: 'path-changed',
          diff: {
            nodes: [
              { nodeId: 'bulk', recorded: 'succeeded', simulated: 'skipped' },
              { nodeId: 'single', recorded: 'skipped', simulated: 'succeeded' },
            ],
            unrecorded: ['single'],
          },
        }),
      ),
    ).toEqual(['nodes bulk succeeded→skipped, single skipped→succeeded', 'unrecorded single']);
    expect(
      changeParts(
        run({
          verdict: 'output-changed',
          diff: {
            output: [
              { op: 'replace', path: '/total', from: 3, to: 4 },
              { op: 'add', path: '/note', to: null },
              { op: 'remove', path: '/old', from: 'x'.repeat(40) },
              { op: 'replace', path: '', from: 1, to: 2 },
            ],
            truncated: true,
          },
        }),
      ),
    ).toEqual([`output /total 3→4, /note +null, /old -"${'x'.repeat(29)}… (+1 more) (cut: the runs have the outputs whole)`]);
    expect(changeParts(run({ verdict: 'not-replayable', reason: 'RESULTS_DELETED' }))).toEqual(['RESULTS_DELETED']);
    expect(changeParts(run({ verdict: 'same', diff: {} }))).toEqual([]);
    expect(changeParts(run({ verdict: '' }))).toEqual([]);
  });

  it('summarises the runs by verdict, pending last', () => {
    const r: Replay = {
      replayId: 'rpl_1',
      workflowKey: 'orders',
      draftRevision: 2,
      status: 'running',
      createdAt: '2026-12-01T21:40:02Z',
      summary: { same: 2, outputChanged: 0, pathChanged: 1, nowFails: 0, nowSucceeds: 0, notReplayable: 1, pending: 1 },
      runs: [
        run({ verdict: 'same' }),
        run({ verdict: 'not-replayable' }),
        run({ verdict: 'path-changed' }),
        run({ verdict: '' }),
        run({ verdict: 'same' }),
      ],
    };
    expect(summaryText(r)).toBe('2 same, 1 path-changed, 1 not-replayable, 1 pending');
    expect(changedCount(r)).toBe(1);
    expect(summaryText({ ...r, runs: [] })).toBe('no runs');
  });

  it('tells a listed replay\'s outcome from its summary', () => {
    const item: Replay = {
      replayId: 'rpl_1',
      workflowKey: 'orders',
      draftRevision: 2,
      status: 'done',
      createdAt: '2026-12-01T21:40:02Z',
      summary: { same: 4, outputChanged: 1, pathChanged: 1, nowFails: 0, nowSucceeds: 1, notReplayable: 2, pending: 0 },
    };
    expect(outcomeText(item)).toEqual({ text: '3 would change', tone: 'changed' });
    expect(outcomeText({ ...item, summary: { ...item.summary, outputChanged: 0, pathChanged: 0, nowSucceeds: 0 } })).toEqual({
      text: 'nothing changes',
      tone: 'same',
    });
    expect(outcomeText({ ...item, status: 'running' }).text).toBe('running');
    expect(changedCount(item)).toBe(0);
  });
});
