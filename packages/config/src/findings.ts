/** How bad a `lbadm doctor` finding is, worst first: the agent's doctor judges, lbadm orders its report by it. */
export const SEVERITIES = ['error', 'warning', 'ok'] as const;
export type Severity = (typeof SEVERITIES)[number];
