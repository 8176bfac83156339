#!/usr/bin/env node
import { runDashboard } from '../dashboard/loopback.js';

// The only place this program exits.
void runDashboard(process.argv.slice(2)).then((code) => process.exit(code));
