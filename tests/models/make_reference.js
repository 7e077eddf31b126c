// Computes ONNX Runtime reference outputs for onnx_models_test.
//
//   node make_reference.js <node_modules> <out dir> <stamp line> [<cases.json>]
//
// Without a cases file: the PaddleOCR cases below. A cases file (bench/models/ uses one for the
// torchvision models it exports) is a JSON list of {name, model, shape, seed}, `model` relative
// to the file's folder; those inputs are uniform noise in [-1, 1) (image classifiers give spread
// outputs on it).
//
// For each case a deterministic synthetic input (mulberry32 seeded per case) is written as
// <case>.input.npy, run through ONNX Runtime with graph optimisations disabled (so it computes
// the graph as written), and the output written as <case>.output.npy. The manifest lists one case
// per line:
//
//   <case> <model path relative to the cache> <input name> <input .npy> <output .npy>
//
// The inputs are synthetic text images (dark strokes grouped into words and lines on noisy light
// paper, normalised as PaddleOCR does), not uniform noise: on noise the detector's sigmoid output
// collapses to ~1e-5 everywhere and a relative error measure becomes meaningless; on text-like
// input it fires on 10-20% of the pixels, as on a real page.
'use strict';
const fs = require('fs');
const path = require('path');

const [nodeModules, outDir, stamp, casesFile] = process.argv.slice(2);
if (!nodeModules || !outDir || !stamp) {
  console.error('usage: node make_reference.js <node_modules> <out dir> <stamp line> [<cases.json>]');
  process.exit(2);
}
const ort = require(path.join(nodeModules, 'onnxruntime-node'));
const assets = path.join(nodeModules, '@gutenye', 'ocr-models', 'assets');

// The fusebox side runs the CPU reference kernels, which bounds the sizes. The detector needs
// sizes divisible by 32 (its FPN adds upsampled maps to skip connections).
const OCR_CASES = [
  { name: 'det_1x3x320x320', model: 'ch_PP-OCRv4_det_infer.onnx', shape: [1, 3, 320, 320], seed: 1 },
  { name: 'det_1x3x256x384', model: 'ch_PP-OCRv4_det_infer.onnx', shape: [1, 3, 256, 384], seed: 2 },
  { name: 'cls_1x3x48x192', model: 'ch_ppocr_mobile_v2.0_cls_infer.onnx', shape: [1, 3, 48, 192], seed: 3 },
  { name: 'cls_2x3x48x192', model: 'ch_ppocr_mobile_v2.0_cls_infer.onnx', shape: [2, 3, 48, 192], seed: 4 },
  // The recogniser reads one text line per image (a convolutional stem, then SVTR blocks: layer
  // norms, attention, MLPs); its width is dynamic.
  { name: 'rec_1x3x48x320', model: 'ch_PP-OCRv4_rec_infer.onnx', shape: [1, 3, 48, 320], seed: 5, line: true },
  { name: 'rec_2x3x48x256', model: 'ch_PP-OCRv4_rec_infer.onnx', shape: [2, 3, 48, 256], seed: 6, line: true },
];

const CASES = casesFile
  ? JSON.parse(fs.readFileSync(casesFile, 'utf8')).map((c) => ({ ...c, model: path.resolve(path.dirname(casesFile), c.model), noise: true }))
  : OCR_CASES.map((c) => ({ ...c, model: path.join(assets, c.model) }));

function uniformNoise(count, rand) {
  const out = new Float32Array(count);
  for (let i = 0; i < count; ++i) out[i] = rand() * 2 - 1;
  return out;
}

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

// A batch of synthetic text images [n,3,h,w]: strokes in word and line groups, normalised with
// PaddleOCR's mean/std. `line`: one text line filling most of the height (a recogniser's input).
function textImage(n, h, w, rand, line) {
  const mean = [0.485, 0.456, 0.406], std = [0.229, 0.224, 0.225];
  const gray = new Float32Array(n * h * w);
  for (let i = 0; i < gray.length; ++i) gray[i] = 225 + rand() * 25;
  for (let b = 0; b < n; ++b) {
    const lh = line ? Math.round(h * 0.6) : Math.max(6, Math.round(h * 0.12));  // line height
    for (let y0 = line ? Math.round(h * 0.2) : Math.round(lh * 0.8); y0 + lh < h; y0 += Math.round(lh * 2.2)) {
      let x = 4 + Math.floor(rand() * 8);
      while (x + 6 < w) {
        const chars = 2 + Math.floor(rand() * 5);
        for (let c = 0; c < chars && x + 6 < w; ++c) {
          const cw = Math.max(3, Math.round(lh * (0.5 + rand() * 0.4)));
          for (let s = 0; s < 3; ++s) {  // three strokes per character
            const vertical = rand() < 0.5;
            const sx = x + Math.floor(rand() * cw), sy = y0 + Math.floor(rand() * lh);
            const t = Math.max(1, Math.round(lh / 6));
            for (let yy = 0; yy < lh; ++yy) {
              for (let xx = 0; xx < cw; ++xx) {
                const Y = y0 + yy, X = x + xx;
                if (Y >= h || X >= w) continue;
                if (vertical ? Math.abs(X - sx) < t : Math.abs(Y - sy) < t) gray[(b * h + Y) * w + X] = 20 + rand() * 40;
              }
            }
          }
          x += cw + 1;
        }
        x += Math.round(lh * (0.6 + rand()));
      }
    }
  }
  const out = new Float32Array(n * 3 * h * w);
  for (let b = 0; b < n; ++b) {
    for (let c = 0; c < 3; ++c) {
      for (let i = 0; i < h * w; ++i) out[(b * 3 + c) * h * w + i] = (gray[b * h * w + i] / 255 - mean[c]) / std[c];
    }
  }
  return out;
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
    const modelPath = c.model;
    if (!fs.existsSync(modelPath)) throw new Error(`model ${modelPath} is missing`);
    if (!sessions.has(c.model)) {
      sessions.set(c.model, await ort.InferenceSession.create(modelPath, {
        graphOptimizationLevel: 'disabled', intraOpNumThreads: 1, executionProviders: ['cpu'] }));
    }
    const session = sessions.get(c.model);
    const [n, , h, w] = c.shape;
    const input = c.noise ? uniformNoise(c.shape.reduce((a, b) => a * b, 1), mulberry32(c.seed))
                          : textImage(n, h, w, mulberry32(c.seed), c.line);
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
