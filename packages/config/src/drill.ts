/**
 * The failure drills' mode names, the one list lbadm (`lbadm drill failover --mode`, its completion) and
 * the testkit's drills (runDrill, `deploy/lab/lab drill`, `pnpm bench failover`) both read. It lives in the
 * core because both import it and lbadm, a program, may not import the testkit.
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
 * A pause of the election alone joins this list when the election runs in a process of its own
 * (DESIGN.md, High availability); today it runs in the agent's event loop, so pause-leader is that pause.
 */
export const DRILL_MODES = [
  'switchover', 'kill-agent', 'box-death', 'etcd-partition', 'peer-partition', 'etcd-outage', 'pause-leader', 'pause-standby',
] as const;

export type DrillMode = (typeof DRILL_MODES)[number];

/** Modes that freeze an agent for a time (`--pause-ms`). */
export const PAUSE_DRILL_MODES: readonly DrillMode[] = ['pause-leader', 'pause-standby'];

/** How long a pause drill freezes the agent (ms): the default, and what `--pause-ms` accepts. */
export const DRILL_PAUSE_MS = { default: 3000, min: 100, max: 60_000 } as const;
