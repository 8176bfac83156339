/**
 * The failure drills' scenario names: what the lab's drills (runDrill, `deploy/lab/lab drill`, `pnpm bench
 * failover`) cause, and the subject of the `drill` events they record in the agents' event log (admin
 * RecordDrill, whose scenario admin.proto documents as this list), which is why the list is in the core.
 *
 *   switchover      planned: the leader hands the vip group over (admin Failover)
 *   kill-agent      the leader's lbd-agent is SIGKILLed (its address watchdog lives on)
 *   box-death       the leader's box dies: every process in it stopped, then every link down
 *   etcd-partition  the leader is cut off from etcd
 *   peer-partition  the leader is cut off from the other director
 *   etcd-outage     every etcd member is paused
 *   pause-leader    the leader's lbd-agent is frozen (SIGSTOP), then thawed (SIGCONT): a stalled process
 *                   (a GC pause, a starved or stopped agent) whose kernel keeps running
 *   pause-standby   the same, to the standby's agent
 *
 * There is no scenario that pauses the election alone: it runs in a thread of the agent (director-agent's
 * election-thread.ts), and SIGSTOP stops the whole process, so pause-leader freezes the election with it.
 */
export const DRILL_SCENARIOS = [
  'switchover', 'kill-agent', 'box-death', 'etcd-partition', 'peer-partition', 'etcd-outage', 'pause-leader', 'pause-standby',
] as const;

export type DrillScenario = (typeof DRILL_SCENARIOS)[number];

/** Scenarios that freeze an agent for a time (`--pause-ms`). */
export const PAUSE_DRILL_SCENARIOS: readonly DrillScenario[] = ['pause-leader', 'pause-standby'];

/** A drill's result, the `to` of its drill event. */
export const DRILL_RESULTS = ['pass', 'fail'] as const;
export type DrillResultWord = (typeof DRILL_RESULTS)[number];

/** How long a pause drill freezes the agent (ms): the default, and what `--pause-ms` accepts. */
export const DRILL_PAUSE_MS = { default: 3000, min: 100, max: 60_000 } as const;
