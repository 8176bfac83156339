export { AnnouncerError, planRoutes, routeKey, routeProblems, type Announcer, type AnnouncerErrorKind, type BgpSession, type Route, type SessionState } from './announcer.js';
export { GobgpdProcess, type GobgpdOptions } from './gobgpd.js';
export { GoBgpAnnouncer, MAX_PATHS_PER_PREFIX, type BgpPeer, type GoBgpAnnouncerOptions, type PathAttributes } from './gobgp.js';
