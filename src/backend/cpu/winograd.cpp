#include <onyx/backend/cpu/winograd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <onyx/backend/cpu/gemm.h>
#include <onyx/backend/cpu/parallel.h>
#include <onyx/backend/cpu/vecmath.h>
#include <onyx/core/error.h>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define ONYX_WINOGRAD_X86 1
#endif

namespace onyx {
namespace host {

namespace {

constexpr int64_t kBlock = 8;  // nChw8c: one AVX2 vector of channels

std::atomic<uint64_t> gRuns{0};

bool enabled() {
  static const bool on = [] {
    const char* v = std::getenv("ONYX_WINOGRAD");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

// The weights as U = G g G^T per (m, c), G = [[1, 0, 0], [1/2, 1/2, 1/2],
// [1/2, -1/2, 1/2], [0, 0, 1]], stored ut[xi][c][m] (xi = 4 i + j): the
// right operand of the 16 GEMMs.
struct WinoWeights {
  const float* w = nullptr;
  bool transposed = false;
  std::vector<float> ut;
};

// transposed: w is a transposed convolution's [C, M, 3, 3], whose
// stride-1 product is the convolution by its taps flipped and its two
// channel dims swapped.
void transformWeights(const float* w, int64_t M, int64_t C, bool transposed, float* ut) {
  parallelFor(M, M * C * 16, [&](int64_t mb, int64_t me) {
    for(int64_t m = mb; m < me; ++m)
      for(int64_t c = 0; c < C; ++c) {
        float g[9];
        for(int k = 0; k < 9; ++k) g[k] = transposed ? w[(c * M + m) * 9 + 8 - k] : w[(m * C + c) * 9 + k];
        float t[4][3];
        for(int j = 0; j < 3; ++j) {
          t[0][j] = g[j];
          t[1][j] = 0.5f * (g[j] + g[3 + j] + g[6 + j]);
          t[2][j] = 0.5f * (g[j] - g[3 + j] + g[6 + j]);
          t[3][j] = g[6 + j];
        }
        for(int i = 0; i < 4; ++i) {
          const float u[4] = {t[i][0], 0.5f * (t[i][0] + t[i][1] + t[i][2]), 0.5f * (t[i][0] - t[i][1] + t[i][2]),
                              t[i][2]};
          for(int j = 0; j < 4; ++j) ut[size_t(((i * 4 + j) * C + c) * M + m)] = u[j];
        }
      }
  });
}

// The geometry of one call: tiles of 2x2 outputs, TH x TW per image, T in
// all, processed in chunks of Tc tiles.
struct Geo {
  int64_t N, C, M, H, W, OH, OW, pt, pl, TH, TW, T, Tc;
};

// One epilogue step (ConvPostOp's kinds that winogradFits takes).
struct Step {
  ConvPostOp::Kind kind;
  float alpha, beta;
};

#ifdef ONYX_WINOGRAD_X86
// V[xi][tl][c] = (B^T d B)[xi] for the tiles [a, b) of the chunk starting at
// tile t0, B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]],
// d the 4x4 patch at (2 ty - pt, 2 tx - pl) (zeros outside x), 8 channels
// per vector.
__attribute__((target("avx2"))) void inputTiles(const Geo& q, const float* x, int64_t t0, int64_t a, int64_t b,
                                                float* V) {
  const int64_t Cb = q.C / kBlock;
  for(int64_t tl = a; tl < b; ++tl) {
    const int64_t t = t0 + tl, n = t / (q.TH * q.TW), ty = (t / q.TW) % q.TH, tx = t % q.TW;
    const int64_t h0 = 2 * ty - q.pt, w0 = 2 * tx - q.pl;
    const bool inside = h0 >= 0 && w0 >= 0 && h0 + 4 <= q.H && w0 + 4 <= q.W;
    for(int64_t cb = 0; cb < Cb; ++cb) {
      const float* xb = x + (n * Cb + cb) * q.H * q.W * kBlock;
      __m256 d[4][4];
      for(int i = 0; i < 4; ++i)
        for(int j = 0; j < 4; ++j) {
          const int64_t h = h0 + i, w = w0 + j;
          d[i][j] = inside || (h >= 0 && h < q.H && w >= 0 && w < q.W) ? _mm256_loadu_ps(xb + (h * q.W + w) * kBlock)
                                                                       : _mm256_setzero_ps();
        }
      __m256 r[4][4];
      for(int j = 0; j < 4; ++j) {
        r[0][j] = _mm256_sub_ps(d[0][j], d[2][j]);
        r[1][j] = _mm256_add_ps(d[1][j], d[2][j]);
        r[2][j] = _mm256_sub_ps(d[2][j], d[1][j]);
        r[3][j] = _mm256_sub_ps(d[1][j], d[3][j]);
      }
      float* out = V + tl * q.C + cb * kBlock;
      const int64_t xiStride = q.Tc * q.C;
      for(int i = 0; i < 4; ++i) {
        _mm256_storeu_ps(out + (i * 4 + 0) * xiStride, _mm256_sub_ps(r[i][0], r[i][2]));
        _mm256_storeu_ps(out + (i * 4 + 1) * xiStride, _mm256_add_ps(r[i][1], r[i][2]));
        _mm256_storeu_ps(out + (i * 4 + 2) * xiStride, _mm256_sub_ps(r[i][2], r[i][1]));
        _mm256_storeu_ps(out + (i * 4 + 3) * xiStride, _mm256_sub_ps(r[i][1], r[i][3]));
      }
    }
  }
}

// y's 2x2 tiles = A^T m A (A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]) from
// Mo[xi][tl][m] for the tiles [a, b) of the chunk at t0, plus the bias, then
// the steps; outputs past OH x OW are dropped.
__attribute__((target("avx2"))) void outputTiles(const Geo& q, const float* Mo, int64_t t0, int64_t a, int64_t b,
                                                 const float* bias, const Step* steps, int nSteps,
                                                 const float* residual, float* y) {
  const int64_t Mb = q.M / kBlock, xiStride = q.Tc * q.M;
  for(int64_t tl = a; tl < b; ++tl) {
    const int64_t t = t0 + tl, n = t / (q.TH * q.TW), ty = (t / q.TW) % q.TH, tx = t % q.TW;
    for(int64_t mb = 0; mb < Mb; ++mb) {
      const float* in = Mo + tl * q.M + mb * kBlock;
      __m256 u0[4], u1[4];
      for(int j = 0; j < 4; ++j) {
        const __m256 m0 = _mm256_loadu_ps(in + (0 * 4 + j) * xiStride), m1 = _mm256_loadu_ps(in + (1 * 4 + j) * xiStride),
                     m2 = _mm256_loadu_ps(in + (2 * 4 + j) * xiStride), m3 = _mm256_loadu_ps(in + (3 * 4 + j) * xiStride);
        u0[j] = _mm256_add_ps(_mm256_add_ps(m0, m1), m2);
        u1[j] = _mm256_sub_ps(_mm256_sub_ps(m1, m2), m3);
      }
      const __m256 bv = bias ? _mm256_loadu_ps(bias + mb * kBlock) : _mm256_setzero_ps();
      __m256 o[2][2];
      o[0][0] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(u0[0], u0[1]), u0[2]), bv);
      o[0][1] = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(u0[1], u0[2]), u0[3]), bv);
      o[1][0] = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(u1[0], u1[1]), u1[2]), bv);
      o[1][1] = _mm256_add_ps(_mm256_sub_ps(_mm256_sub_ps(u1[1], u1[2]), u1[3]), bv);
      for(int di = 0; di < 2; ++di)
        for(int dj = 0; dj < 2; ++dj) {
          const int64_t oh = 2 * ty + di, ow = 2 * tx + dj;
          if(oh >= q.OH || ow >= q.OW) continue;
          const int64_t at = (((n * Mb + mb) * q.OH + oh) * q.OW + ow) * kBlock;
          __m256 v = o[di][dj];
          for(int s = 0; s < nSteps; ++s) {
            switch(steps[s].kind) {
              case ConvPostOp::Kind::Relu: v = _mm256_max_ps(v, _mm256_setzero_ps()); break;
              case ConvPostOp::Kind::Clip:
                v = _mm256_min_ps(_mm256_max_ps(v, _mm256_set1_ps(steps[s].alpha)), _mm256_set1_ps(steps[s].beta));
                break;
              case ConvPostOp::Kind::Sum: v = _mm256_add_ps(v, _mm256_loadu_ps(residual + at)); break;
              default: break;  // winogradFits takes no other kind
            }
          }
          _mm256_storeu_ps(y + at, v);
        }
    }
  }
}
#endif

// The calling thread's buffers, kept between calls (a call allocates
// nothing once they have grown): 0, 1, 2 the nChw8c copies of a plain x, y
// and residual; 3 a chunk's V [16, Tc, C] and Mo [16, Tc, M].
enum Role { kX = 0, kY, kResidual, kChunk };
float* threadBuffer(Role role, size_t floats) {
  thread_local std::vector<float> bufs[4];
  if(bufs[role].size() < floats) bufs[role].resize(floats);
  return bufs[role].data();
}

}  // namespace

bool winogradFits(const ConvDims& cd, int nd, const ConvLayouts& lay, const ConvEpilogue* ep) {
#ifdef ONYX_WINOGRAD_X86
  const ConvGeom& g = cd.g;
  if(!enabled() || nd != 2 || vec::bestIsa() == vec::Isa::scalar || cd.G != 1) return false;
  if(g.k[1] != 3 || g.k[2] != 3 || g.s[1] != 1 || g.s[2] != 1 || g.d[1] != 1 || g.d[2] != 1) return false;
  for(int d = 1; d < 3; ++d)
    if(g.pb[d] > 2 || g.pe[d] > 2) return false;
  // 32 channels both ways: the 16 GEMMs of 32 x 32 run at a fraction of
  // peak and the transforms dominate (U-Net's 32-channel 128x128 layers:
  // 4.1 ms direct, 4.5 ms this way on one Zen 3 core).
  if(cd.C < 32 || cd.M < 32 || std::max(cd.C, cd.M) < 64 || cd.C % kBlock != 0 || cd.M % kBlock != 0) return false;
  // The transformed weights (16 C M floats, 1.8 times the kernel's) are read
  // once per call for 32 C M FLOPs per tile: below 32 tiles the call is
  // bound by that read (ResNet-18's 7x7 layers at batch 1, 16 tiles: 3.8 ->
  // 4.5 ms on one Zen 3 core, where 28x28 and 14x14 went 3.0 -> 2.0 ms).
  if(cd.N * ((g.pos[1] + 1) / 2) * ((g.pos[2] + 1) / 2) < 32) return false;
  auto takes = [](int layout) { return layout == 0 || layout == kBlock; };
  if(!takes(lay.x) || !takes(lay.y)) return false;
  int sums = 0;
  for(const ConvPostOp& op : ep ? ep->ops : std::vector<ConvPostOp>()) {
    if(op.kind == ConvPostOp::Kind::Sum) ++sums;
    else if(op.kind != ConvPostOp::Kind::Relu && op.kind != ConvPostOp::Kind::Clip) return false;
  }
  return sums == 0 || (sums == 1 && takes(lay.residual) && ep->residual);
#else
  (void)cd, (void)nd, (void)lay, (void)ep;
  return false;
#endif
}

void winogradConvForward(const ConvDims& cd, const float* x, const float* w, const float* b, float* y,
                         const ConvEpilogue* ep, std::shared_ptr<void>* slot, const ConvLayouts& lay,
                         bool transposedW) {
#ifdef ONYX_WINOGRAD_X86
  gRuns.fetch_add(1, std::memory_order_relaxed);
  // Plain tensors go through nChw8c copies (as oneDNN's kernel reorders
  // them inside its primitive); the residual first, as it may be y itself.
  const ConvGeom& gg = cd.g;
  const int64_t xSize = cd.N * cd.C * gg.imgSize, ySize = cd.N * cd.M * gg.posSize;
  ConvEpilogue blockedEp;
  if(ep && ep->residual && lay.residual == 0) {
    float* r = threadBuffer(kResidual, size_t(ySize));
    dnnlReorderChannels(ep->residual, 0, r, int(kBlock), cd.N, cd.M, gg.pos[1], gg.pos[2]);
    blockedEp = *ep;
    blockedEp.residual = r;
    ep = &blockedEp;
  }
  if(lay.x == 0) {
    float* xb = threadBuffer(kX, size_t(xSize));
    dnnlReorderChannels(x, 0, xb, int(kBlock), cd.N, cd.C, gg.img[1], gg.img[2]);
    x = xb;
  }
  float* yOut = y;
  if(lay.y == 0) y = threadBuffer(kY, size_t(ySize));
  const ConvGeom& g = cd.g;
  Geo q;
  q.N = cd.N;
  q.C = cd.C;
  q.M = cd.M;
  q.H = g.img[1];
  q.W = g.img[2];
  q.OH = g.pos[1];
  q.OW = g.pos[2];
  q.pt = g.pb[1];
  q.pl = g.pb[2];
  q.TH = (q.OH + 1) / 2;
  q.TW = (q.OW + 1) / 2;
  q.T = q.N * q.TH * q.TW;
  if(q.T == 0) return;
  // The transformed weights: kept in the slot while W is the same buffer.
  std::shared_ptr<WinoWeights> ww = slot ? std::static_pointer_cast<WinoWeights>(*slot) : nullptr;
  if(!ww || ww->w != w || ww->transposed != transposedW) {
    ww = std::make_shared<WinoWeights>();
    ww->w = w;
    ww->transposed = transposedW;
    ww->ut.resize(size_t(16 * q.C * q.M));
    transformWeights(w, q.M, q.C, transposedW, ww->ut.data());
    if(slot) *slot = ww;
  }
  std::vector<Step> steps;
  const float* residual = ep ? ep->residual : nullptr;
  for(const ConvPostOp& op : ep ? ep->ops : std::vector<ConvPostOp>()) steps.push_back({op.kind, op.alpha, op.beta});
  // Chunks of tiles whose V and Mo fit in about 384 KiB (the L2 of the
  // cores measured), each on one thread, read the transformed weights once
  // per chunk; one chunk of all the tiles, whose 16 GEMMs the threads
  // share, reads them once but writes and reads its V and Mo through memory.
  // Chunks where the weights' re-reads cost less than that (ResNet-18's
  // 56x56 layers: 17 chunks of 256 KiB of weights against 13 MiB of V and
  // Mo), one chunk otherwise (its 14x14 layers of 256 channels: 4 chunks of
  // 4 MiB against 3 MiB; 1.9 -> 0.9 ms on two Zen 3 cores).
  const int threads = numThreads();
  const int64_t fitTc = std::max<int64_t>(16, std::min<int64_t>(512, (384 << 10) / (16 * 4 * (q.C + q.M))));
  const int64_t fitChunks = (q.T + fitTc - 1) / fitTc;
  const bool manyChunks = fitChunks >= int64_t(threads) && fitChunks > 1 &&
                          (fitChunks - 1) * 64 * q.C * q.M <= 128 * q.T * (q.C + q.M);
  q.Tc = std::min(q.T, manyChunks || 16 * 4 * q.T * (q.C + q.M) > (8 << 20) ? fitTc : q.T);
  const int64_t chunks = (q.T + q.Tc - 1) / q.Tc;
  const size_t vSize = size_t(16 * q.Tc * q.C), mSize = size_t(16 * q.Tc * q.M);
  const float* ut = ww->ut.data();
  auto gemms = [&](const float* V, float* Mo, int64_t rows, int64_t xb, int64_t xe) {
    for(int64_t xi = xb; xi < xe; ++xi)
      gemm<float>(false, false, rows, q.M, q.C, 1.0, V + xi * q.Tc * q.C, q.C, ut + xi * q.C * q.M, q.M, 0.0,
                  Mo + xi * q.Tc * q.M, q.M);
  };
  if(manyChunks) {
    // Many chunks: each thread takes whole chunks (transforms and its 16
    // GEMMs on one thread, no barrier between them).
    parallelFor(chunks, q.T * 16 * q.C * q.M, [&](int64_t cb, int64_t ce) {
      float* V = threadBuffer(kChunk, vSize + mSize);
      float* Mo = V + vSize;
      for(int64_t ch = cb; ch < ce; ++ch) {
        const int64_t t0 = ch * q.Tc, rows = std::min(q.Tc, q.T - t0);
        inputTiles(q, x, t0, 0, rows, V);
        gemms(V, Mo, rows, 0, 16);
        outputTiles(q, Mo, t0, 0, rows, b, steps.data(), int(steps.size()), residual, y);
      }
    });
  } else {
  // Few chunks (small images): the threads share each chunk's transforms
  // and its 16 GEMMs, on the calling thread's buffer.
  float* V = threadBuffer(kChunk, vSize + mSize);
  float* Mo = V + vSize;
  for(int64_t ch = 0; ch < chunks; ++ch) {
    const int64_t t0 = ch * q.Tc, rows = std::min(q.Tc, q.T - t0);
    parallelFor(rows, rows * 16 * q.C, [&](int64_t a, int64_t e) { inputTiles(q, x, t0, a, e, V); });
    parallelFor(16, rows * 16 * q.C * q.M, [&](int64_t xb, int64_t xe) { gemms(V, Mo, rows, xb, xe); });
    parallelFor(rows, rows * 16 * q.M,
                [&](int64_t a, int64_t e) { outputTiles(q, Mo, t0, a, e, b, steps.data(), int(steps.size()), residual, y); });
  }
  }
  if(y != yOut) dnnlReorderChannels(y, int(kBlock), yOut, 0, cd.N, cd.M, gg.pos[1], gg.pos[2]);
#else
  (void)cd, (void)x, (void)w, (void)b, (void)y, (void)ep, (void)slot, (void)lay, (void)transposedW;
  ONYX_ASSERT(false, "winogradConvForward without AVX2 (winogradFits is false here)");
#endif
}

uint64_t winogradRuns() { return gRuns.load(std::memory_order_relaxed); }

}  // namespace host
}  // namespace onyx
