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
 */
export const DRILL_MODES = ['switchover', 'kill-agent', 'box-death', 'etcd-partition', 'peer-partition', 'etcd-outage'] as const;

export type DrillMode = (typeof DRILL_MODES)[number];
