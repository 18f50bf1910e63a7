// SPDX-License-Identifier: MIT
// Open a `profctl flame` SVG in headless Chromium (playwright-core) and use
// it as a person would: read the frames, search through the "Search" button
// and its prompt, hover a frame, click it to zoom, press Escape to reset.
// Prints one JSON object on stdout:
//   {initial, searched, zoomed, reset: [frame], matched, details, reset_shown,
//    page_errors: [...]}
// where a frame is {name, v, d, x, w, hidden, anc, hit, fill, label}; x and
// w are the rect's rendered box in CSS px.
// Usage: node flame.js NODE_MODULES_DIR CHROMIUM FLAME.svg SEARCH_TERM CLICK_NAME
'use strict';
const path = require('path');

async function main() {
  const [modules, chromiumPath, svg, term, clickName] = process.argv.slice(2);
  const { chromium } = require(path.join(modules, 'playwright-core'));
  // --no-sandbox: Chromium's sandbox refuses to start as root (containers, CI).
  const browser = await chromium.launch({ executablePath: chromiumPath, args: ['--no-sandbox'] });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto('file://' + svg);
    await page.waitForFunction(() => window.flame && window.flame.frames.length > 0);
    const snap = () => page.evaluate(() => window.flame.frames.map((f) => {
      const r = f.rect.getBoundingClientRect();
      return {
        name: f.name, v: f.v, d: f.d, x: r.x, w: r.width,
        hidden: f.g.classList.contains('hide'), anc: f.g.classList.contains('anc'),
        hit: f.g.classList.contains('hit'), fill: f.rect.getAttribute('fill'), label: f.text.textContent,
      };
    }));
    const center = (name) => page.evaluate((name) => {
      const f = window.flame.frames.find((f) => f.name === name);
      const r = f.rect.getBoundingClientRect();
      return { x: r.x + r.width / 2, y: r.y + r.height / 2 };
    }, name);
    const out = { page_errors: errors };

    out.initial = await snap();
    page.once('dialog', (d) => d.accept(term));
    await page.click('#search');
    out.searched = await snap();
    out.matched = await page.textContent('#matched');
    const c = await center(clickName);
    await page.mouse.move(c.x, c.y);
    out.details = await page.textContent('#details');
    await page.mouse.click(c.x, c.y);
    out.zoomed = await snap();
    out.reset_shown = await page.evaluate(() => !document.getElementById('reset').classList.contains('hide'));
    await page.keyboard.press('Escape');
    out.reset = await snap();
    process.stdout.write(JSON.stringify(out) + '\n');
  } finally {
    await browser.close();
  }
}

main().catch((e) => { console.error('flame.js: ' + (e && e.stack || e)); process.exit(1); });
