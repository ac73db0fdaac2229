// Shapes of the weft API (api/openapi.yaml): only what the canvas reads.

export type Kind =
  | 'input'
  | 'agent'
  | 'agent-decision'
  | 'gate'
  | 'validator'
  | 'action'
  | 'merge'
  | 'output'
  | 'approval';

export interface MappingEntry {
  literal?: unknown;
  pointer?: string;
  template?: string;
  bindings?: Record<string, string>;
}

export interface Retry {
  maxAttempts?: number;
  initialIntervalMs?: number;
  backoff?: number;
  maxIntervalMs?: number;
}

export interface GraphNode {
  id: string;
  kind: Kind;
  inputs?: Record<string, string>;
  outputs?: Record<string, string>;
  language?: string;
  expression?: string;
  schema?: string | Record<string, unknown>;
  agent?: { key: string; revision: number };
  action?: { id: string; version: number };
  tools?: string;
  mapping?: Record<string, MappingEntry>;
  retry?: Retry;
  timeoutMs?: number;
}

export interface GraphEdge {
  from: string; // node.port
  to: string; // node.port
}

export interface Graph {
  schemaVersion: number;
  schemas?: Record<string, unknown>;
  nodes: GraphNode[];
  edges: GraphEdge[];
  toolsets?: Record<string, { tools?: string[]; skill?: string }>;
  tools?: string;
}

export interface WorkflowSummary {
  key: string;
  createdBy: string;
  createdAt: string;
  updatedAt: string;
  draftRevision: number;
  publishedRevision: number | null;
  checksum: string | null;
}

export interface RevisionSummary {
  revision: number;
  checksum: string;
  draftRevision: number;
  publishedBy: string;
  publishedAt: string;
}

/** A workflow's caps and default budget, and what its runs hold of them. */
export interface WorkflowLimits {
  workflowKey: string;
  maxConcurrentRuns: number | null;
  maxStartsPerMinute: number | null;
  budget: Budget;
  running: number;
  throttled: number;
  startsLastMinute: number;
  updatedBy: string | null;
  updatedAt: string | null;
}

export interface WorkflowDetail extends WorkflowSummary {
  draft: { revision: number; savedBy: string; savedAt: string; graph: Graph };
  published: RevisionSummary | null;
  /** Absent from servers older than limits. */
  limits?: WorkflowLimits;
}

export interface ActionContract {
  id: string;
  version: number;
  risk: string;
  requiredPermissions?: string[];
  timeoutMs?: number;
  hash?: string;
  description?: string;
}

export interface AgentContract {
  key: string;
  revision: number;
  [k: string]: unknown;
}

export interface RevisionDetail extends RevisionSummary {
  key: string;
  graph: Graph;
  order: string[];
  dependencies: { actions: ActionContract[]; agents: AgentContract[] };
  permissions: string[];
  nodePermissions: Record<string, string[]> | null;
  estimatedHistoryEvents: number;
}

/** throttled: accepted over a limit, waiting for a slot (never started); queued: its start pending. */
export type RunStatus = 'throttled' | 'queued' | 'running' | 'succeeded' | 'failed' | 'cancelled';

/** A run's budget: what its agents' model calls may spend (null: no bound). */
export interface Budget {
  maxCostUsd: number | null;
  maxTokens: number | null;
}
export type Mode = 'live' | 'simulation';
export type NodeStatus =
  | 'pending'
  | 'running'
  | 'waiting'
  | 'awaiting_approval'
  | 'succeeded'
  | 'failed'
  | 'skipped'
  | 'cancelled';

export type ApprovalStatus = 'pending' | 'approved' | 'rejected' | 'timed_out' | 'cancelled';

/** A node's latest approval request (an approval node, or an agent's tool call). */
export interface ApprovalState {
  request: number;
  status: ApprovalStatus;
  timeoutMs: number;
  requestedAt: string;
  deadlineAt?: string;
  call?: { ordinal: number; tool: string; input?: unknown; inputBytes?: number; inputOmitted?: boolean };
  actor?: { kind: string; sub?: string; name?: string; identity?: string };
  comment?: string;
  decidedAt?: string;
}

export interface NodeState {
  id: string;
  kind: string;
  status: NodeStatus;
  attempt: number;
  port?: string;
  reason?: string;
  error?: string;
  retryAt?: string;
  approval?: ApprovalState;
}

export interface Usage {
  calls?: number;
  inputTokens?: number;
  outputTokens?: number;
  totalTokens?: number;
  costUsd?: number;
}

export interface Run {
  runId: string;
  workflowKey: string;
  revision: number;
  draftRevision?: number;
  checksum: string;
  mode: Mode;
  status: RunStatus;
  input: unknown;
  output: unknown;
  error: { code?: string; message?: string; nodeId?: string } | null;
  origin: { kind: string; id?: string };
  actor: { kind: string; sub: string; name?: string; configuredBy?: string };
  nodes?: NodeState[];
  usage: Usage;
  temporal: { workflowId: string; runId?: string; uiUrl?: string };
  createdAt: string;
  startedAt?: string;
  finishedAt?: string;
  /** When the run got its slot under its limits; absent while throttled. */
  admittedAt?: string;
  /** A throttled run's place in its workflow's queue (1 is next). */
  position?: number;
  /** The run's effective budget; null when it has none. */
  budget?: Budget | null;
}

export interface RunEvent {
  seq: number;
  type: string;
  schemaVersion: number;
  at: string;
  nodeId?: string;
  attempt?: number;
  data: Record<string, unknown>;
  prevHash: string;
  hash: string;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

export interface ApiErrorBody {
  error: { code: string; message: string; details?: Record<string, unknown> };
}

/** One issue of a dry-run or check, at a JSON pointer into the document. */
export interface GraphIssue {
  code: string;
  path: string;
  message: string;
}

/** The dry-run's verdict (POST /v1/workflows/{key}/dry-run, POST /v1/graphs/check). */
export interface DryRun {
  valid: boolean;
  issues: GraphIssue[];
  warnings?: GraphIssue[];
  order: string[];
  references: { actions: { id: string; version: number }[]; agents: { key: string; revision: number }[] };
  permissions: string[];
  checksum: string;
  limits: Record<string, number>;
  estimatedHistoryEvents: number;
}

/** Where the editor drew a workflow's nodes (GET /v1/workflows/{key}/layout). */
export interface Layout {
  key: string;
  positions: Record<string, { x: number; y: number }>;
  updatedBy: string | null;
  updatedAt: string | null;
}

/** An action contract of GET /v1/actions. */
export interface ActionInfo {
  id: string;
  version: number;
  risk: string;
  description?: string;
  inputSchema?: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  requiredPermissions?: string[];
  timeoutMs?: number;
}

/** An agent of GET /v1/agents. */
export interface AgentInfo {
  key: string;
  archived?: boolean;
  latestRevision?: number;
  revision?: number;
  [k: string]: unknown;
}

/** A variable definition of GET /v1/variables. */
export interface Variable {
  key: string;
  label: string;
  kind: string;
  scope?: string;
  requiredBindings?: string[];
  sample?: string;
  description?: string;
}

/** A replay verdict ('' while the run is not compared yet). */
export type Verdict = 'same' | 'output-changed' | 'path-changed' | 'now-fails' | 'now-succeeds' | 'not-replayable' | '';

/** One recorded live run of a replay (GET /v1/replays/{id}). */
export interface ReplayRun {
  runId: string;
  verdict: Verdict;
  /** Why a run is not replayable (RESULTS_DELETED, …). */
  reason?: string;
  /** The run of the draft in simulation; GET /v1/runs/{id} reads it. */
  simulationRunId?: string;
  recordedStatus?: string;
  simulatedStatus?: string;
  diff?: {
    output?: { op: 'replace' | 'add' | 'remove'; path: string; from?: unknown; to?: unknown }[];
    nodes?: { nodeId: string; recorded: string; simulated: string }[];
    unrecorded?: string[];
    truncated?: boolean;
  };
}

/** A replay of recorded live runs through a draft (GET /v1/replays/{id}). */
export interface Replay {
  replayId: string;
  workflowKey: string;
  draftRevision: number;
  status: 'running' | 'done';
  createdAt: string;
  finishedAt?: string | null;
  summary: {
    same: number;
    outputChanged: number;
    pathChanged: number;
    nowFails: number;
    nowSucceeds: number;
    notReplayable: number;
    pending: number;
  };
  /** Every replayed run; absent from list items. */
  runs?: ReplayRun[];
}
