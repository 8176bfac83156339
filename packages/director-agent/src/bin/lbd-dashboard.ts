#!/usr/bin/env node
import { runDashboard } from '@lbd/operator-surfaces';

// The only place this program exits.
void runDashboard(process.argv.slice(2)).then((code) => process.exit(code));
