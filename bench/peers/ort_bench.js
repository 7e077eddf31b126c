// Times ONNX Runtime (onnxruntime-node, CPU) on the real models of onnx_models_test, as the peer
// of bench/model_bench.cpp (bench/run_model_bench.sh runs both and prints one table).
//
//   node bench/peers/ort_bench.js [--cache DIR] [--runs N] [--warmup W] [--min-ms T] [--only CASE]
//
// DIR is the model cache that tests/models/fetch_models.sh prepares (default: tests/models/cache,
// or $FUSEBOX_MODEL_CACHE); the cases, models and inputs are those of its ref/manifest.txt, so
// both sides run the same deterministic .npy inputs. Sessions use every graph optimisation
// ('all'), 2 intra-op threads ($ORT_THREADS when set) and 1 inter-op thread. For each case it
// runs W warm-up runs, then at least N timed runs lasting at least T ms in all (at most 10000),
// and prints one line per case:
//
//   ort <model> <size> <median_ms> samples <n>        e.g.  ort det 1x3x320x320 23.7 samples 85
//
// --profile N: N more runs with ONNX Runtime's profiler on after the timed ones, then one line per
// operator type, slowest first, of the mean time per run in its kernels (the peer of model_bench's
// per-op profile):
//
//   ort_op <model> <size> <op_type> <ms_per_run> nodes <n>
'use strict';
const fs = require('fs');
const path = require('path');

// ORT_THREADS overrides the 2 intra-op threads (e.g. 1, beside OMP_NUM_THREADS=1 for fusebox, to
// compare single-threaded on a machine whose cores are shared).
const INTRA_OP_THREADS = Number(process.env.ORT_THREADS || 2);

function parseArgs(argv) {
  const opts = {
    cache: process.env.FUSEBOX_MODEL_CACHE || path.join(__dirname, '..', '..', 'tests', 'models', 'cache'),
    runs: 20,
    warmup: 3,
    minMs: 2000,
    only: null,
    profile: 0,
  };
  for (let i = 0; i < argv.length; ++i) {
    const a = argv[i];
    const value = () => {
      if (i + 1 >= argv.length) usage(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--cache') opts.cache = value();
    else if (a === '--runs') opts.runs = Number(value());
    else if (a === '--warmup') opts.warmup = Number(value());
    else if (a === '--min-ms') opts.minMs = Number(value());
    else if (a === '--only') opts.only = value();
    else if (a === '--profile')
      opts.profile = Number(value());
    else if (a === '--help' || a === '-h') usage(null);
    else usage(`unknown argument '${a}'`);
  }
  if (!Number.isInteger(opts.runs) || opts.runs < 1) usage('--runs takes an integer >= 1');
  if (!Number.isInteger(opts.warmup) || opts.warmup < 0) usage('--warmup takes an integer >= 0');
  if (!Number.isInteger(opts.minMs) || opts.minMs < 0) usage('--min-ms takes an integer >= 0');
  if (!Number.isInteger(opts.profile) || opts.profile < 0) usage('--profile takes an integer >= 0');
  return opts;
}

function usage(problem) {
  const text =
      'usage: node bench/peers/ort_bench.js [--cache DIR] [--runs N] [--warmup W] [--min-ms T] [--only CASE] [--profile N]';
  if (problem) {
    console.error(`ort_bench: ${problem}\n${text}`);
    process.exit(2);
  }
  console.log(text);
  process.exit(0);
}

// Reads a float32 little-endian C-order .npy (what make_reference.js writes).
function readNpy(file) {
  const bytes = fs.readFileSync(file);
  if (bytes.toString('latin1', 0, 6) !== '\x93NUMPY') throw new Error(`${file}: not a .npy file`);
  const major = bytes[6];
  const headerLen = major === 1 ? bytes.readUInt16LE(8) : bytes.readUInt32LE(8);
  const start = major === 1 ? 10 : 12;
  const header = bytes.toString('latin1', start, start + headerLen);
  if (!header.includes("'<f4'") || header.includes("'fortran_order': True")) {
    throw new Error(`${file}: expected a C-order float32 array, header ${header.trim()}`);
  }
  const m = header.match(/'shape': \(([^)]*)\)/);
  if (!m) throw new Error(`${file}: no shape in header ${header.trim()}`);
  const shape = m[1].split(',').map((s) => s.trim()).filter((s) => s.length).map(Number);
  const count = shape.reduce((a, b) => a * b, 1);
  const data = new Float32Array(count);
  const body = start + headerLen;
  for (let i = 0; i < count; ++i) data[i] = bytes.readFloatLE(body + 4 * i);
  return { data, shape };
}

function median(xs) {
  const s = [...xs].sort((a, b) => a - b);
  const mid = s.length >> 1;
  return s.length % 2 ? s[mid] : (s[mid - 1] + s[mid]) / 2;
}

// Case names are <model>_<size> (det_1x3x320x320).
function splitCase(name) {
  const k = name.indexOf('_');
  return k < 0 ? [name, '?'] : [name.slice(0, k), name.slice(k + 1)];
}

// Runs `runs` profiled runs in a session of its own (the profiler is a session option) and prints
// the kernel time per operator type. The profile file goes to the system's temporary directory and
// is removed after reading.
async function profileCase(ort, modelPath, feeds, runs, model, size) {
  const prefix = path.join(require('os').tmpdir(), `ort_profile_${process.pid}`);
  const session = await ort.InferenceSession.create(modelPath, {
    graphOptimizationLevel: 'all',
    intraOpNumThreads: INTRA_OP_THREADS,
    interOpNumThreads: 1,
    executionMode: 'sequential',
    executionProviders: ['cpu'],
    enableProfiling: true,
    profileFilePrefix: prefix
  });
  for (let i = 0; i < 3; ++i) await session.run(feeds);  // warm-up, profiled too: skipped below by run count
  for (let i = 0; i < runs; ++i) await session.run(feeds);
  session.endProfiling();
  const dir = path.dirname(prefix);
  const file =
      fs.readdirSync(dir).filter((f) => f.startsWith(path.basename(prefix))).map((f) => path.join(dir, f))[0];
  if (!file) throw new Error(`no profile file ${prefix}*`);
  const events = JSON.parse(fs.readFileSync(file, 'utf8'));
  fs.unlinkSync(file);
  const byOp = new Map();
  let runIndex = -1;
  for (const e of events) {
    if (e.cat === 'Session' && e.name === 'model_run') ++runIndex;
  }
  const totalRuns = runIndex + 1;
  // Kernel events carry args.op_name; the first 3 runs (warm-up) are left out by their order.
  let seenRuns = 0;
  for (const e of events) {
    if (e.cat === 'Session' && e.name === 'model_run') {
      ++seenRuns;
      continue;
    }
    if (e.cat !== 'Node' || !e.name.endsWith('_kernel_time') || !e.args || !e.args.op_name) continue;
    if (totalRuns - runs > 0 && seenRuns < totalRuns - runs) continue;
    const o = byOp.get(e.args.op_name) || {us: 0, nodes: new Set()};
    o.us += e.dur;
    o.nodes.add(e.name);
    byOp.set(e.args.op_name, o);
  }
  [...byOp.entries()].sort((a, b) => b[1].us - a[1].us).forEach(([op, o]) => {
    console.log(`ort_op ${model} ${size} ${op} ${(o.us / 1000 / runs).toFixed(3)} nodes ${o.nodes.size}`);
  });
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  const manifestPath = path.join(opts.cache, 'ref', 'manifest.txt');
  if (!fs.existsSync(manifestPath)) {
    throw new Error(`no ${manifestPath}: run tests/models/fetch_models.sh first (or pass --cache DIR)`);
  }
  const ort = require(path.join(opts.cache, 'npm', 'node_modules', 'onnxruntime-node'));
  const cases = fs.readFileSync(manifestPath, 'utf8').split('\n')
    .filter((l) => l.trim() && !l.startsWith('#'))
    .map((l) => {
      const [name, model, inputName, inputNpy] = l.trim().split(/\s+/);
      return { name, model, inputName, inputNpy };
    })
    .filter((c) => !opts.only || c.name === opts.only);
  if (opts.only && cases.length === 0) throw new Error(`no case ${opts.only} in ${manifestPath}`);
  const sessions = new Map();
  for (const c of cases) {
    if (!sessions.has(c.model)) {
      sessions.set(c.model, await ort.InferenceSession.create(path.join(opts.cache, c.model), {
        graphOptimizationLevel: 'all', intraOpNumThreads: INTRA_OP_THREADS, interOpNumThreads: 1,
        executionMode: 'sequential', executionProviders: ['cpu'] }));
    }
    const session = sessions.get(c.model);
    const input = readNpy(path.join(opts.cache, c.inputNpy));
    const feeds = { [c.inputName]: new ort.Tensor('float32', input.data, input.shape) };
    for (let i = 0; i < opts.warmup; ++i) await session.run(feeds);
    const ms = [];
    let spent = 0;
    while ((ms.length < opts.runs || spent < opts.minMs) && ms.length < 10000) {
      const t0 = process.hrtime.bigint();
      await session.run(feeds);
      ms.push(Number(process.hrtime.bigint() - t0) / 1e6);
      spent += ms[ms.length - 1];
    }
    const [model, size] = splitCase(c.name);
    console.log(`ort ${model} ${size} ${median(ms).toFixed(3)} samples ${ms.length}`);
    if (opts.profile > 0)
      await profileCase(ort, path.join(opts.cache, c.model), feeds, opts.profile, model, size);
  }
  // With --only: the process's peak resident memory (the runtime, the session, the model).
  if (opts.only) {
    const [model, size] = splitCase(opts.only);
    console.log(`ort_peak ${model} ${size} peak_rss_mb ${(process.resourceUsage().maxRSS / 1024).toFixed(1)}`);
  }
}

main().catch((e) => {
  console.error(`ort_bench: ${e && e.message ? e.message : String(e)}`);
  process.exit(1);
});
