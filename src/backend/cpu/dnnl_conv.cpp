#include <onyx/backend/cpu/dnnl_conv.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <list>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>

#include <oneapi/dnnl/dnnl.hpp>

#include <onyx/backend/cpu/vecmath.h>
#include <onyx/core/error.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#ifdef _OPENMP
#include <omp.h>
#endif

namespace onyx {
namespace host {

namespace {

using dnnl::memory;
using Dims = memory::dims;
using Tag = memory::format_tag;
constexpr auto kF32 = memory::data_type::f32;
constexpr auto kBF16 = memory::data_type::bf16;

enum class Kind : uint8_t { Forward, Transposed, GradWeight };

// The three tensors of a problem in the convolution's view (see the header).
enum Role { kImg = 0, kW = 1, kPos = 2 };

std::atomic<int> gLayout{int(DnnlLayout::Auto)};
std::atomic<uint64_t> gRuns{0};
std::atomic<uint64_t> gTransposes{0};

// ONYX_DNNL=0 turns the oneDNN path off (A/B timings); setDnnlEnabled overrides.
std::atomic<bool>& enabledFlag() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("ONYX_DNNL");
    return !(e && std::strcmp(e, "0") == 0);
  }()};
  return on;
}

const dnnl::engine& cpuEngine() {
  static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

// Streams are cheap; one per thread keeps concurrent callers apart.
dnnl::stream& threadStream() {
  thread_local dnnl::stream s(cpuEngine());
  return s;
}

// Per-thread memory for blocked copies of operands and the scratchpad: it
// grows to the largest problem seen and is reused, so steady runs allocate
// nothing.
class ThreadArena {
public:
  char* reserve(size_t bytes) {
    if(bytes > size_) {
      buf_.reset(static_cast<char*>(std::aligned_alloc(kAlign, roundUp(bytes))));
      size_ = buf_ ? roundUp(bytes) : 0;
      if(!buf_) throw std::bad_alloc();
    }
    return buf_.get();
  }
  static size_t roundUp(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }
  static constexpr size_t kAlign = 64;

private:
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> buf_;
  size_t size_ = 0;
};

ThreadArena& threadArena() {
  thread_local ThreadArena a;
  return a;
}

int ompThreads() {
#ifdef _OPENMP
  return omp_get_max_threads();
#else
  return 1;
#endif
}

// The spatial lists of nd dims (the last nd of the geometry's three).
struct Lists {
  Dims img, pos, k, s, d, pl, pr;
};

// The end pad oneDNN needs: ONNX's when it is consistent with the sizes
// (oneDNN checks (img - span + pl + pr) / s + 1 == pos), otherwise the
// smallest one that is; the windows read the same elements either way.
int64_t endPad(int64_t img, int64_t pos, int64_t k, int64_t s, int64_t d, int64_t pl, int64_t pe) {
  const int64_t span = (k - 1) * d + 1;
  const int64_t num = img - span + pl + pe;
  if(num >= 0 && num / s + 1 == pos) return pe;
  return (pos - 1) * s + span - img - pl;
}

bool lists(const ConvDims& cd, int nd, Lists& l) {
  const ConvGeom& g = cd.g;
  for(int i = 3 - nd; i < 3; ++i) {
    if(g.pb[i] < 0 || g.s[i] < 1 || g.d[i] < 1) return false;
    l.img.push_back(g.img[i]);
    l.pos.push_back(g.pos[i]);
    l.k.push_back(g.k[i]);
    l.s.push_back(g.s[i]);
    l.d.push_back(g.d[i] - 1);  // oneDNN counts dilation from 0
    l.pl.push_back(g.pb[i]);
    l.pr.push_back(endPad(g.img[i], g.pos[i], g.k[i], g.s[i], g.d[i], g.pb[i], g.pe[i]));
  }
  return true;
}

Tag plainTag(int ndims) {
  switch(ndims) {
    case 1: return Tag::a;
    case 3: return Tag::abc;
    case 4: return Tag::abcd;
    case 5: return Tag::abcde;
    default: return Tag::abcdef;
  }
}

// oneDNN's channel-blocked tag for 4-D tensors (see ConvLayouts).
// 1 is channels-last (NHWC, what qlinear_conv's float path passes).
Tag blockedTag(int block) { return block == 1 ? Tag::acdb : block == 16 ? Tag::nChw16c : Tag::nChw8c; }

Dims cat(Dims a, const Dims& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Row-major strides of dims.
Dims rowMajor(const Dims& dims) {
  Dims s(dims.size());
  int64_t acc = 1;
  for(size_t i = dims.size(); i-- > 0;) {
    s[i] = acc;
    acc *= dims[i];
  }
  return s;
}

// W [M, C/G, k..] as oneDNN's weights: (G,) OC, IC, k.. For a convolution
// OC = M; for a deconvolution (the image is its dst) OC = C/G per group and
// IC = M/G, read transposed from the same memory.
memory::desc weightsMd(const ConvDims& cd, const Lists& l, bool transposed, memory::data_type t = kF32) {
  const bool grouped = cd.G > 1;
  Dims lead = grouped ? Dims{cd.G, cd.Mg, cd.Cg} : Dims{cd.Mg, cd.Cg};
  Dims dims = cat(lead, l.k);
  Dims strides = rowMajor(dims);  // the memory order (G, Mg, Cg, k..)
  if(transposed) {
    const size_t o = grouped ? 1 : 0;  // swap the Mg and Cg axes: logical (G, Cg, Mg, k..)
    std::swap(dims[o], dims[o + 1]);
    std::swap(strides[o], strides[o + 1]);
  }
  return memory::desc(dims, t, strides);
}

// ----------------------------------------------------------- the primitive

// What a primitive takes and the reorders around it. Operands whose layout
// the primitive chose differently from the plain tensor are reordered in
// (inputs) or out (outputs) through the thread arena.
struct Prim {
  bool ok = false;
  dnnl::primitive prim;
  memory::desc user[3], mine[3];
  memory::desc residual;  // how the Sum step's residual is stored
  dnnl::reorder move[3];  // user -> mine for inputs, mine -> user for outputs
  bool reorder[3] = {false, false, false};
  // move[r] is a plain NCHW <-> NHWC (acdb) copy of a 4-D float32 image
  // tensor: done by channelsTranspose instead (see there).
  bool nhwcMove[3] = {false, false, false};
  // move[r] is a float32 NCHW -> bfloat16 NHWC copy (a bfloat16
  // convolution's input): done by channelsTransposeBf16 instead.
  bool nhwcBf16Move[3] = {false, false, false};
  // move[r] is a float32 NCHW <-> nChw8c copy of a 4-D image whose last
  // block is padded: done by channelsBlock8 instead (see there).
  bool blockMove[3] = {false, false, false};
  bool hasSum = false;
  size_t scratch = 0;  // the largest scratchpad among prim and reorders
};

bool isOutput(Kind k, int role) {
  return (k == Kind::Forward && role == kPos) || (k == Kind::Transposed && role == kImg) ||
         (k == Kind::GradWeight && role == kW);
}

dnnl::primitive_attr userScratchpad() {
  dnnl::primitive_attr a;
  a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  return a;
}

void appendPostOps(dnnl::post_ops& po, const ConvEpilogue& ep) {
  using A = dnnl::algorithm;
  for(const ConvPostOp& op : ep.ops) {
    switch(op.kind) {
      case ConvPostOp::Kind::Sum: po.append_sum(1.f); break;
      case ConvPostOp::Kind::Relu: po.append_eltwise(1.f, A::eltwise_relu, 0.f, 0.f); break;
      case ConvPostOp::Kind::LeakyRelu: po.append_eltwise(1.f, A::eltwise_relu, op.alpha, 0.f); break;
      case ConvPostOp::Kind::Clip: po.append_eltwise(1.f, A::eltwise_clip, op.alpha, op.beta); break;
      case ConvPostOp::Kind::HardSwish: po.append_eltwise(1.f, A::eltwise_hardswish, 0.f, 0.f); break;
      case ConvPostOp::Kind::HardSigmoid:  // oneDNN 2.6 has no hardsigmoid: a line, then a clip
        po.append_eltwise(1.f, A::eltwise_linear, op.alpha, op.beta);
        po.append_eltwise(1.f, A::eltwise_clip, 0.f, 1.f);
        break;
      case ConvPostOp::Kind::Swish: po.append_eltwise(1.f, A::eltwise_swish, 1.f, 0.f); break;
      case ConvPostOp::Kind::GeluErf: po.append_eltwise(1.f, A::eltwise_gelu_erf, 0.f, 0.f); break;
      case ConvPostOp::Kind::GeluTanh: po.append_eltwise(1.f, A::eltwise_gelu_tanh, 0.f, 0.f); break;
      case ConvPostOp::Kind::Logistic: po.append_eltwise(1.f, A::eltwise_logistic, 0.f, 0.f); break;
      case ConvPostOp::Kind::Tanh: po.append_eltwise(1.f, A::eltwise_tanh, 0.f, 0.f); break;
    }
  }
}

// Plain src/dst (no reorders, but oneDNN's plain-layout kernels, mostly
// its gemm-based ones) or blocked ones (its direct jit kernels, plus a
// reorder in and out). Timed on the 2-core Zen 4 (2 threads) over
// ResNet-50's and MobileNetV2/EfficientNet's shapes: blocked wins for nearly
// all, depthwise by 4-10x, except
// - a 1x1 dense conv (stride 1, no pads) weight gradient, which on plain
//   tensors is one GEMM per sample (2.3x faster). Not its forward: in a whole
//   ResNet-50 (batch 1, 1 thread) the plain 1x1 forwards ran oneDNN's
//   gemm-based kernel ("x64:gemm:jit", ONEDNN_VERBOSE=1) at 249 ms of a
//   3-run total against 59 ms for every blocked conv together;
// - an image with few channels (ResNet's 3-channel input) in the transposed
//   conv that writes it (its blocked dst pads 3 channels to 16: plain 3.5x
//   faster) and in the weight gradient that reads it (plain 1.5x faster).
//   The forward conv reading it stays blocked (2.5x faster): oneDNN reads
//   such a src plain anyway and blocks only the output. With AVX2's 8-channel
//   blocks the weight gradient is the other way round: ResNet-18's first
//   conv in its training step (batch 32, 2 threads, a Zen 3 EPYC, alternating)
//   73-79 ms blocked (dy's reorder included) against 112-115 plain, so there
//   it stays blocked (the transposed case was not measured there).
bool usePlain(Kind kind, const ConvDims& cd, DnnlLayout layout) {
  if(layout != DnnlLayout::Auto) return layout == DnnlLayout::Plain;
  if(kind != Kind::Transposed && kind != Kind::Forward && cd.G == 1 && cd.direct) return true;
  if(kind == Kind::Forward) return cd.M <= 4;  // a written tensor of few channels, as below
  if(kind == Kind::GradWeight && dnnlChannelBlock() == 8) return false;
  return cd.C <= 4;
}

Prim makePrim(Kind kind, const ConvDims& cd, int nd, const Lists& l, bool bias, const ConvEpilogue* ep,
              DnnlLayout layout, ConvLayouts lay, bool forceBlocked, bool bf16) {
  Prim p;
  const dnnl::engine& eng = cpuEngine();
  const Tag tag = plainTag(nd + 2);
  p.user[kImg] = memory::desc(cat({cd.N, cd.C}, l.img), kF32, lay.x ? blockedTag(lay.x) : tag);
  p.user[kPos] = memory::desc(cat({cd.N, cd.M}, l.pos), kF32, lay.y ? blockedTag(lay.y) : tag);
  p.user[kW] = weightsMd(cd, l, kind == Kind::Transposed);
  p.residual = memory::desc(cat({cd.N, cd.M}, l.pos), kF32, lay.residual ? blockedTag(lay.residual) : tag);
  const bool plain = usePlain(kind, cd, layout);
  memory::desc want[3];
  // bf16: the inputs are read as bfloat16 (the reorders in round them),
  // the output is written in float32.
  auto typeOf = [&](int r) { return bf16 && !isOutput(kind, r) ? kBF16 : kF32; };
  for(int r = 0; r < 3; ++r)
    want[r] = memory::desc(p.user[r].dims(), typeOf(r), (plain && r != kW) ? tag : Tag::any);
  // A blocked tensor is asked for as it is, so that no reorder runs
  // (forceBlocked: the first try; the caller retries with oneDNN's choice).
  if(forceBlocked) {
    if(lay.x) want[kImg] = memory::desc(p.user[kImg].dims(), typeOf(kImg), blockedTag(lay.x));
    if(lay.y) want[kPos] = memory::desc(p.user[kPos].dims(), typeOf(kPos), blockedTag(lay.y));
  }

  dnnl::primitive_attr attr = userScratchpad();
  if(ep && !ep->ops.empty()) {
    dnnl::post_ops po;
    appendPostOps(po, *ep);
    attr.set_post_ops(po);
    for(const ConvPostOp& op : ep->ops) p.hasSum = p.hasSum || op.kind == ConvPostOp::Kind::Sum;
  }
  dnnl::primitive_desc_base* base = nullptr;
  dnnl::convolution_forward::primitive_desc fwd;
  dnnl::deconvolution_forward::primitive_desc deconv;
  dnnl::convolution_backward_weights::primitive_desc bwdW;
  using P = dnnl::prop_kind;
  using A = dnnl::algorithm;
  if(kind == Kind::Forward) {
    memory::desc b = bias ? memory::desc({cd.M}, kF32, Tag::a) : memory::desc();
    dnnl::convolution_forward::desc d(P::forward_inference, A::convolution_direct, want[kImg], want[kW], b,
                                      want[kPos], l.s, l.d, l.pl, l.pr);
    fwd = dnnl::convolution_forward::primitive_desc(d, attr, eng);
    // Forced layouts oneDNN has no fast kernel for (a blocked src with a
    // plain dst of 2 channels) get its reference one, 500x slower than a
    // reorder: then let it choose (the caller's second try).
    if(forceBlocked && (lay.x || lay.y) && std::string(fwd.impl_info_str()).rfind("ref", 0) == 0)
      throw dnnl::error(dnnl_unimplemented, "only a reference kernel for the forced layouts");
    p.mine[kImg] = fwd.src_desc();
    p.mine[kW] = fwd.weights_desc();
    p.mine[kPos] = fwd.dst_desc();
    p.prim = dnnl::convolution_forward(fwd);
    base = &fwd;
  } else if(kind == Kind::Transposed) {
    memory::desc b = bias ? memory::desc({cd.C}, kF32, Tag::a) : memory::desc();
    dnnl::deconvolution_forward::desc d(P::forward_inference, A::deconvolution_direct, want[kPos], want[kW], b,
                                        want[kImg], l.s, l.d, l.pl, l.pr);
    deconv = dnnl::deconvolution_forward::primitive_desc(d, attr, eng);
    p.mine[kPos] = deconv.src_desc();
    p.mine[kW] = deconv.weights_desc();
    p.mine[kImg] = deconv.dst_desc();
    p.prim = dnnl::deconvolution_forward(deconv);
    base = &deconv;
  } else {
    // The forward primitive_desc is the hint oneDNN wants for a backward one.
    // (In bfloat16 the hint's weights are bfloat16 too: oneDNN has no
    // forward of bfloat16 src with float32 weights.)
    const memory::desc hintW(p.user[kW].dims(), bf16 ? kBF16 : kF32, Tag::any);
    dnnl::convolution_forward::desc fd(P::forward_training, A::convolution_direct, want[kImg], hintW,
                                       want[kPos], l.s, l.d, l.pl, l.pr);
    dnnl::convolution_forward::primitive_desc hint(fd, eng);
    dnnl::convolution_backward_weights::desc d(A::convolution_direct, want[kImg], want[kW], want[kPos], l.s, l.d,
                                               l.pl, l.pr);
    bwdW = dnnl::convolution_backward_weights::primitive_desc(d, attr, eng, hint);
    p.mine[kImg] = bwdW.src_desc();
    p.mine[kW] = bwdW.diff_weights_desc();
    p.mine[kPos] = bwdW.diff_dst_desc();
    p.prim = dnnl::convolution_backward_weights(bwdW);
    base = &bwdW;
  }
  // A bfloat16 problem only oneDNN's reference kernel takes is declined
  // (run falls back to float32).
  if(bf16 && std::string(base->impl_info_str()).rfind("ref", 0) == 0)
    throw dnnl::error(dnnl_unimplemented, "only a reference kernel in bfloat16");
  p.scratch = base->scratchpad_desc().get_size();
  for(int r = 0; r < 3; ++r) {
    p.reorder[r] = p.mine[r] != p.user[r];
    if(!p.reorder[r]) continue;
    const bool out = isOutput(kind, r);
    const memory::desc& from = out ? p.mine[r] : p.user[r];
    const memory::desc& to = out ? p.user[r] : p.mine[r];
    dnnl::reorder::primitive_desc rpd(eng, from, eng, to, userScratchpad());
    p.scratch = std::max(p.scratch, rpd.scratchpad_desc().get_size());
    p.move[r] = dnnl::reorder(rpd);
    if(r != kW && nd == 2) {
      const memory::desc plain4(p.user[r].dims(), kF32, Tag::abcd), nhwc4(p.user[r].dims(), kF32, Tag::acdb);
      p.nhwcMove[r] = (from == plain4 && to == nhwc4) || (from == nhwc4 && to == plain4);
      p.nhwcBf16Move[r] = from == plain4 && to == memory::desc(p.user[r].dims(), kBF16, Tag::acdb);
      const memory::desc blocked8(p.user[r].dims(), kF32, Tag::nChw8c);
      p.blockMove[r] = p.user[r].dims()[1] % 8 != 0 && vec::bestIsa() != vec::Isa::scalar &&
                       ((from == plain4 && to == blocked8) || (from == blocked8 && to == plain4));
    }
  }
  p.ok = true;
  return p;
}

// ------------------------------------------------------------------ cache

struct KeyHash {
  size_t operator()(const std::vector<int64_t>& k) const {
    uint64_t h = 1469598103934665603ull;
    for(int64_t v : k) h = (h ^ uint64_t(v)) * 1099511628211ull;
    return size_t(h);
  }
};

// A bounded LRU of primitives by everything that defines them. Entries are
// shared, so one evicted while another thread runs it stays alive.
template <class P>
class PrimCacheOf {
public:
  static constexpr size_t kCapacity = 256;

  template <class Make>
  std::shared_ptr<const P> get(const std::vector<int64_t>& key, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key);
      if(it != map_.end()) {
        lru_.splice(lru_.begin(), lru_, it->second);
        return it->second->second;
      }
    }
    // Made outside the lock (it can take a while); two threads making the
    // same one is harmless: the second insert keeps the first.
    auto made = std::make_shared<const P>(make());
    std::lock_guard<std::mutex> lock(mu_);
    auto it = map_.find(key);
    if(it != map_.end()) return it->second->second;
    lru_.emplace_front(key, made);
    map_.emplace(key, lru_.begin());
    if(lru_.size() > kCapacity) {
      map_.erase(lru_.back().first);
      lru_.pop_back();
    }
    return made;
  }
private:
  using Entry = std::pair<std::vector<int64_t>, std::shared_ptr<const P>>;
  std::mutex mu_;
  std::list<Entry> lru_;
  std::unordered_map<std::vector<int64_t>, typename std::list<Entry>::iterator, KeyHash> map_;
};
using PrimCache = PrimCacheOf<Prim>;

PrimCache& cache() {
  static PrimCache c;
  return c;
}

int64_t floatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return int64_t(u);
}

std::vector<int64_t> keyOf(Kind kind, const ConvDims& cd, int nd, const Lists& l, bool bias,
                           const ConvEpilogue* ep, DnnlLayout layout, ConvLayouts lay, bool bf16) {
  std::vector<int64_t> k{int64_t(kind), nd, cd.N, cd.C, cd.M, cd.G, bias, int64_t(usePlain(kind, cd, layout)),
                         ompThreads(), lay.x, lay.y, lay.residual, bf16};
  for(const Dims* v : {&l.img, &l.pos, &l.k, &l.s, &l.d, &l.pl, &l.pr}) k.insert(k.end(), v->begin(), v->end());
  if(ep)
    for(const ConvPostOp& op : ep->ops) {
      k.push_back(int64_t(op.kind));
      k.push_back(floatBits(op.alpha));
      k.push_back(floatBits(op.beta));
    }
  return k;
}

// Reordered weights kept in a caller's slot.
struct KeptWeights {
  const float* from = nullptr;
  memory::desc md;
  memory mem;
};

bool fits(const ConvDims& cd) {
  // oneDNN's kernels index with int: keep every tensor well inside it.
  const int64_t lim = int64_t(1) << 31;
  return cd.N * cd.C * cd.g.imgSize < lim && cd.N * cd.M * cd.g.posSize < lim && cd.M * cd.Cg * cd.g.kSize < lim;
}

bool validEpilogue(const ConvEpilogue* ep) {
  if(!ep) return true;
  int sums = 0;
  for(const ConvPostOp& op : ep->ops) sums += op.kind == ConvPostOp::Kind::Sum;
  return sums == 0 || (sums == 1 && ep->residual);
}

// NCHW <-> NHWC of a float32 [N, C, H, W] tensor: per image, a [rows, cols]
// matrix into its transpose ([C, HW] -> [HW, C] or back), in 32 x 32 tiles
// whose reads and writes stay in the L1 cache, images and tile rows in
// parallel, 8 x 8 blocks transposed in AVX registers. oneDNN 2.6's own
// reorder between these two layouts ("jit:uni") moved 2 to 3 GB/s here
// (1.3 ms of SqueezeNet's 12 on one core went into the NHWC output of its
// first convolution alone); this one about 17 GB/s (0.36 ms).
__attribute__((always_inline)) inline void transposeTile(const float* __restrict from, float* __restrict to,
                                                         int64_t rows, int64_t cols, int64_t r0, int64_t r1,
                                                         int64_t c0, int64_t c1) {
  for(int64_t c = c0; c < c1; ++c)
    for(int64_t r = r0; r < r1; ++r) to[c * rows + r] = from[r * cols + c];
}
void transposeTileBase(const float* from, float* to, int64_t rows, int64_t cols, int64_t r0, int64_t r1, int64_t c0,
                       int64_t c1) {
  transposeTile(from, to, rows, cols, r0, r1, c0, c1);
}
#if defined(__x86_64__)
// The transpose of the 8 x 8 floats in r (row i in r[i]) into o: unpack
// pairs of rows, shuffle pairs of pairs, swap 128-bit halves.
ONYX_TARGET_AVX2 inline void transpose8x8Regs(const __m256 r[8], __m256 o[8]) {
  __m256 t[8], u[8];
  for(int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  for(int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], 0x44);
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], 0xEE);
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0x44);
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], 0xEE);
  }
  for(int i = 0; i < 4; ++i) {
    o[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    o[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}
// An 8 x 8 block of floats (rows ls apart) into its transpose (rows ld apart).
ONYX_TARGET_AVX2 inline void transpose8x8(const float* s, int64_t ls, float* d, int64_t ld) {
  __m256 r[8], o[8];
  for(int i = 0; i < 8; ++i) r[i] = _mm256_loadu_ps(s + i * ls);
  transpose8x8Regs(r, o);
  for(int i = 0; i < 8; ++i) _mm256_storeu_ps(d + i * ld, o[i]);
}
ONYX_TARGET_AVX2 void transposeTileAvx2(const float* from, float* to, int64_t rows, int64_t cols, int64_t r0,
                                        int64_t r1, int64_t c0, int64_t c1) {
  int64_t r = r0;
  for(; r + 8 <= r1; r += 8) {
    int64_t c = c0;
    for(; c + 8 <= c1; c += 8) transpose8x8(from + r * cols + c, cols, to + c * rows + r, rows);
    transposeTile(from, to, rows, cols, r, r + 8, c, c1);
  }
  transposeTile(from, to, rows, cols, r, r1, c0, c1);
}
#else
void transposeTileAvx2(const float* from, float* to, int64_t rows, int64_t cols, int64_t r0, int64_t r1, int64_t c0,
                       int64_t c1) {
  transposeTile(from, to, rows, cols, r0, r1, c0, c1);
}
#endif

// tile(n, r0, r1, c0, c1) over the 32 x 32 tiles of N [rows, cols]
// matrices, images and tile rows in parallel (tile columns in order).
template <class Tile>
void overTiles(int64_t N, int64_t rows, int64_t cols, Tile&& tile) {
  constexpr int64_t T = 32;
  const int64_t rowTiles = (rows + T - 1) / T, colTiles = (cols + T - 1) / T;
  const int64_t tiles = N * rowTiles;
  const bool big = N * rows * cols >= (int64_t(1) << 15);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if(big && !omp_in_parallel())
#endif
  for(int64_t t = 0; t < tiles; ++t) {
    const int64_t n = t / rowTiles, r0 = (t % rowTiles) * T, r1 = std::min(rows, r0 + T);
    for(int64_t ct = 0; ct < colTiles; ++ct) tile(n, r0, r1, ct * T, std::min(cols, ct * T + T));
  }
  (void)big;
}

void channelsTranspose(const float* from, float* to, int64_t N, int64_t rows, int64_t cols) {
  const bool avx2 = vec::bestIsa() != vec::Isa::scalar;
  overTiles(N, rows, cols, [&](int64_t n, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const float* f = from + n * rows * cols;
    float* o = to + n * rows * cols;
    if(avx2) transposeTileAvx2(f, o, rows, cols, r0, r1, c0, c1);
    else transposeTileBase(f, o, rows, cols, r0, r1, c0, c1);
  });
}

// float32 to bfloat16, rounded to nearest even (NaN stays a quiet NaN).
inline uint16_t toBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  if((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// channelsTranspose from float32 NCHW to bfloat16 NHWC: each 32 x 32 tile
// transposed into a local buffer (8 x 8 blocks in AVX registers), then its
// rows rounded to bfloat16 into place. oneDNN 2.6's reorder doing both at
// once (jit:uni) took 150 ms of a bfloat16 ResNet-18 training step (batch
// 32, 2 threads).
void channelsTransposeBf16(const float* from, uint16_t* to, int64_t N, int64_t rows, int64_t cols) {
  constexpr int64_t T = 32;
  const bool avx2 = vec::bestIsa() != vec::Isa::scalar;
  overTiles(N, rows, cols, [&](int64_t n, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    alignas(64) float buf[T * T];
    // buf[(c - c0) * T + (r - r0)] = the tile at from + r0 * cols + c0
    // (transposeTile's `rows` is the destination's row stride, `cols` the
    // source's).
    const float* src = from + n * rows * cols + r0 * cols + c0;
    if(avx2) transposeTileAvx2(src, buf, T, cols, 0, r1 - r0, 0, c1 - c0);
    else transposeTileBase(src, buf, T, cols, 0, r1 - r0, 0, c1 - c0);
    uint16_t* o = to + n * rows * cols;
    for(int64_t c = c0; c < c1; ++c) {
      uint16_t* dst = o + c * rows + r0;
      const float* b = buf + (c - c0) * T;
#pragma omp simd
      for(int64_t r = 0; r < r1 - r0; ++r) dst[r] = toBf16(b[r]);
    }
  });
}

// NCHW <-> nChw8c of a float32 [N, C, H, W] tensor whose channels do not
// fill their blocks of 8 (the last block zero-padded): per image and block,
// the (up to) 8 channel planes [8, HW] are the transpose of the blocked slab
// [HW, 8], 8 x 8 at a time in AVX registers, a missing plane read as zeros
// (or its row not written back). oneDNN 2.6's reorder between these
// layouts ran at a third of its one-thread speed on 2 threads of a Zen 3
// EPYC (1 x 116 x 28 x 28 into blocks: 0.077 ms against 0.027 on one
// thread; this copy 0.034), and ShuffleNetV2's convolutions, whose 58 /
// 116 / 232 channels keep them plain with a copy in and out, spent 1.3 of
// its 6 ms at batch 1 in them. Channel counts that fill their blocks stay
// with oneDNN's reorder, which was as fast or faster there (32 x 64 x 56
// x 56: 2.4 against 3.2 ms).
#if defined(__x86_64__)
// One image's block cb: planes [rows, HW] (rows <= 8 real channels) <->
// blocked [HW, 8]. (Its own function: clang outlines an OpenMP loop's body
// without the target attribute, so the AVX2 code may not sit in one.)
ONYX_TARGET_AVX2 void blockSlab8(float* planes, float* blocked, bool toBlocked, int rows, int64_t HW) {
  int64_t q = 0;
  for(; q + 8 <= HW; q += 8) {
    __m256 r[8], o[8];
    for(int i = 0; i < 8; ++i)
      r[i] = toBlocked ? (i < rows ? _mm256_loadu_ps(planes + i * HW + q) : _mm256_setzero_ps())
                       : _mm256_loadu_ps(blocked + (q + i) * 8);
    transpose8x8Regs(r, o);
    if(toBlocked)
      for(int i = 0; i < 8; ++i) _mm256_storeu_ps(blocked + (q + i) * 8, o[i]);
    else
      for(int i = 0; i < rows; ++i) _mm256_storeu_ps(planes + i * HW + q, o[i]);
  }
  for(; q < HW; ++q)
    for(int i = 0; i < 8; ++i) {
      if(toBlocked) blocked[q * 8 + i] = i < rows ? planes[i * HW + q] : 0.f;
      else if(i < rows) planes[i * HW + q] = blocked[q * 8 + i];
    }
}

void channelsBlock8(const float* from, float* to, bool toBlocked, int64_t N, int64_t C, int64_t HW) {
  const int64_t CB = (C + 7) / 8, slabs = N * CB;
  const bool big = slabs * 8 * HW >= (int64_t(1) << 15);
#ifdef _OPENMP
#pragma omp parallel for schedule(static) if(big && !omp_in_parallel())
#endif
  for(int64_t slab = 0; slab < slabs; ++slab) {
    const int64_t n = slab / CB, cb = slab % CB;
    const int rows = int(std::min<int64_t>(8, C - cb * 8));  // the block's real channels
    float* planes = (toBlocked ? const_cast<float*>(from) : to) + (n * C + cb * 8) * HW;
    float* blocked = (toBlocked ? to : const_cast<float*>(from)) + slab * HW * 8;
    blockSlab8(planes, blocked, toBlocked, rows, HW);
  }
  (void)big;
}
#endif

// The copy move[r] makes, by channelsTranspose or channelsBlock8 where it
// is one (from: whatever the move reads).
void moveImage(const Prim& p, int r, const memory& from, const memory& to, dnnl::stream& strm,
               const memory& scratch) {
  if(p.nhwcBf16Move[r]) {
    const memory::dims d = from.get_desc().dims();
    strm.wait();
    channelsTransposeBf16(static_cast<const float*>(from.get_data_handle()),
                          static_cast<uint16_t*>(to.get_data_handle()), d[0], d[1], d[2] * d[3]);
    gTransposes.fetch_add(1, std::memory_order_relaxed);
    return;
  }
#if defined(__x86_64__)
  if(p.blockMove[r]) {
    const memory::dims d = from.get_desc().dims();
    const bool toBlocked = from.get_desc() == memory::desc(d, kF32, Tag::abcd);
    strm.wait();
    channelsBlock8(static_cast<const float*>(from.get_data_handle()), static_cast<float*>(to.get_data_handle()),
                   toBlocked, d[0], d[1], d[2] * d[3]);
    gTransposes.fetch_add(1, std::memory_order_relaxed);
    return;
  }
#endif
  if(!p.nhwcMove[r]) {
    p.move[r].execute(strm, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratch}});
    return;
  }
  const memory::dims d = from.get_desc().dims();
  const int64_t N = d[0], C = d[1], HW = d[2] * d[3];
  const bool toNhwc = to.get_desc() == memory::desc(d, kF32, Tag::acdb);
  strm.wait();  // what oneDNN queued before
  channelsTranspose(static_cast<const float*>(from.get_data_handle()), static_cast<float*>(to.get_data_handle()), N,
                    toNhwc ? C : HW, toNhwc ? HW : C);
  gTransposes.fetch_add(1, std::memory_order_relaxed);
}

// ptr[role]: the plain tensors; slot: kept weights (inputs only).
bool run(Kind kind, const ConvDims& cd, int nd, const float* const ptr[3], const float* bias,
         const ConvEpilogue* ep, DnnlWeightSlot* slot, ConvLayouts lay = {}, bool bf16 = false) {
  if(nd < 1 || nd > 3 || cd.N <= 0 || cd.C <= 0 || cd.M <= 0 || cd.G <= 0 || cd.g.imgSize <= 0 ||
     cd.g.posSize <= 0 || cd.g.kSize <= 0 || !fits(cd) || !validEpilogue(ep))
    return false;
  // A blocked layout is a promise about memory the caller cannot take back:
  // a problem oneDNN declines here cannot fall back to the portable kernel
  // with it, so the caller unblocks first (see fused_conv's kernel).
  if(lay.any() && (kind != Kind::Forward || nd != 2)) return false;
  Lists l;
  if(!lists(cd, nd, l)) return false;
  const DnnlLayout layout = DnnlLayout(gLayout.load());
  bf16 = bf16 && dnnlHasBf16();
  auto key = keyOf(kind, cd, nd, l, bias != nullptr, ep, layout, lay, bf16);
  std::shared_ptr<const Prim> pp = cache().get(key, [&] {
    for(bool force : {true, false}) {
      if(!force && !lay.any()) break;
      try {
        return makePrim(kind, cd, nd, l, bias != nullptr, ep, layout, lay, force, bf16);
      } catch(const dnnl::error&) {
      }
    }
    return Prim{};  // cached too: no retry on every run
  });
  const Prim& p = *pp;
  // A bfloat16 problem oneDNN declines runs in float32.
  if(!p.ok) return bf16 ? run(kind, cd, nd, ptr, bias, ep, slot, lay, false) : false;

  const dnnl::engine& eng = cpuEngine();
  dnnl::stream& strm = threadStream();
  // Arena layout: the scratchpad, then a blocked copy per reordered operand.
  // Weights reordered into a caller's slot live there, not in the arena.
  const bool slotW = slot && p.reorder[kW] && !isOutput(kind, kW);
  size_t offs[3], total = ThreadArena::roundUp(p.scratch);
  for(int r = 0; r < 3; ++r) {
    offs[r] = total;
    if(p.reorder[r] && !(r == kW && slotW)) total += ThreadArena::roundUp(p.mine[r].get_size());
  }
  KeptWeights* keep = slotW ? static_cast<KeptWeights*>(slot->get()) : nullptr;
  const bool kept = keep && keep->from == ptr[kW] && keep->md == p.mine[kW];
  char* arena = threadArena().reserve(std::max<size_t>(total, 1));
  memory scratch(memory::desc({int64_t(std::max<size_t>(p.scratch, 1))}, memory::data_type::u8, Tag::a), eng,
                 arena);
  auto userMem = [&](int r) { return memory(p.user[r], eng, const_cast<float*>(ptr[r])); };

  memory use[3];
  for(int r = 0; r < 3; ++r) {
    if(!p.reorder[r]) {
      use[r] = userMem(r);
      continue;
    }
    const bool out = isOutput(kind, r);
    if(r == kW && slotW) {
      if(!kept) {
        auto k = std::make_shared<KeptWeights>();
        k->from = ptr[kW];
        k->md = p.mine[kW];
        k->mem = memory(p.mine[kW], eng);
        memory src = userMem(kW);
        p.move[kW].execute(strm, {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, k->mem}, {DNNL_ARG_SCRATCHPAD, scratch}});
        *slot = k;
        keep = k.get();
      }
      use[r] = keep->mem;
      continue;
    }
    use[r] = memory(p.mine[r], eng, arena + offs[r]);
    if(!out) moveImage(p, r, userMem(r), use[r], strm, scratch);
  }

  // The Sum step adds to what the output holds: put the residual there.
  const int outRole = kind == Kind::Forward ? kPos : kImg;
  if(p.hasSum) {
    if(p.residual == p.mine[outRole]) {
      // Stored as the primitive writes its output: a copy (none when the
      // residual is the output itself).
      if(ep->residual != use[outRole].get_data_handle())
        std::memcpy(use[outRole].get_data_handle(), ep->residual, p.mine[outRole].get_size());
    } else {
      // Made per run (oneDNN's own primitive cache makes that cheap): a
      // residual stored unlike the output is the rare case.
      memory res(p.residual, eng, const_cast<float*>(ep->residual));
      dnnl::reorder(res, use[outRole]).execute(strm, res, use[outRole]);
    }
  }

  std::unordered_map<int, memory> args{{DNNL_ARG_SCRATCHPAD, scratch}};
  if(kind == Kind::Forward || kind == Kind::Transposed) {
    args[DNNL_ARG_SRC] = use[kind == Kind::Forward ? kImg : kPos];
    args[DNNL_ARG_WEIGHTS] = use[kW];
    args[DNNL_ARG_DST] = use[outRole];
    if(bias) args[DNNL_ARG_BIAS] = memory(memory::desc({kind == Kind::Forward ? cd.M : cd.C}, kF32, Tag::a), eng,
                                          const_cast<float*>(bias));
  } else {
    args[DNNL_ARG_SRC] = use[kImg];
    args[DNNL_ARG_DIFF_DST] = use[kPos];
    args[DNNL_ARG_DIFF_WEIGHTS] = use[kW];
  }
  p.prim.execute(strm, args);
  for(int r = 0; r < 3; ++r)
    if(p.reorder[r] && isOutput(kind, r)) moveImage(p, r, use[r], userMem(r), strm, scratch);
  strm.wait();
  gRuns.fetch_add(1, std::memory_order_relaxed);
  return true;
}

// ------------------------------------------------------------------ int8

}  // namespace

// A run's dnnl::memory objects and argument map, kept per convolution and
// per calling thread: a MobileNetV2 run makes 52 such calls, and building
// 6-7 memory objects and a hash map for each was a few percent of its time.
// Only the data handles change between runs; per thread, so concurrent runs
// of one Session never share one.
struct QConvArgs {
  memory scratch, srcUser, dstUser, src, dst, xzm, yzm;
  int32_t xz = 0, yz = 0;
  std::unordered_map<int, memory> args;
};

struct DnnlQConv {
  dnnl::convolution_forward prim;
  memory::desc srcUser, src, dstUser, dst;
  dnnl::reorder srcMove, dstMove;
  bool reorderSrc = false, reorderDst = false;
  memory weights;                 // reordered, owned
  std::vector<int32_t> biasData;  // empty: no bias
  memory::desc biasMd;
  size_t scratch = 0;
  bool rawSums = false;
  bool xZeroFixed = false;  // made for x's zero point 0 only (no compensation)
  // Each calling thread's memory objects (dnnlQConvRun), kept with the
  // primitive so that they go when it goes.
  mutable std::mutex mu;
  mutable std::unordered_map<std::thread::id, std::shared_ptr<QConvArgs>> perThread;
};

std::shared_ptr<DnnlQConv> dnnlQConvPrepare(const ConvDims& cd, int nd, const int8_t* w, const int32_t* bias,
                                            const std::vector<float>& scales, bool ySigned, bool xNhwc, bool yNhwc,
                                            bool rawSums, bool xZeroFixed) {
  if((xNhwc || yNhwc) && nd != 2) return nullptr;
  if(nd < 1 || nd > 3 || cd.N <= 0 || cd.C <= 0 || cd.M <= 0 || cd.G <= 0 || cd.g.imgSize <= 0 ||
     cd.g.posSize <= 0 || cd.g.kSize <= 0 || !fits(cd) || scales.empty())
    return nullptr;
  Lists l;
  if(!lists(cd, nd, l)) return nullptr;
  using dt = memory::data_type;
  const dnnl::engine& eng = cpuEngine();
  const Tag tag = plainTag(nd + 2);
  auto q = std::make_shared<DnnlQConv>();
  try {
    const dt yt = rawSums ? dt::s32 : ySigned ? dt::s8 : dt::u8;
    q->rawSums = rawSums;
    q->xZeroFixed = xZeroFixed;
    q->srcUser = memory::desc(cat({cd.N, cd.C}, l.img), dt::u8, xNhwc ? Tag::acdb : tag);
    q->dstUser = memory::desc(cat({cd.N, cd.M}, l.pos), yt, yNhwc ? Tag::acdb : tag);
    const memory::desc wUser = weightsMd(cd, l, false, dt::s8);
    if(bias) q->biasMd = memory::desc({cd.M}, dt::s32, Tag::a);
    dnnl::primitive_attr attr = userScratchpad();
    if(!xZeroFixed) attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if(!rawSums) {
      attr.set_output_scales(scales.size() > 1 ? 2 : 0, scales);
      attr.set_zero_points(DNNL_ARG_DST, 0, {DNNL_RUNTIME_S32_VAL});
    }
    dnnl::convolution_forward::desc d(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct,
                                      memory::desc(q->srcUser.dims(), dt::u8, Tag::any),
                                      memory::desc(wUser.dims(), dt::s8, Tag::any), q->biasMd,
                                      memory::desc(q->dstUser.dims(), yt, Tag::any), l.s, l.d, l.pl, l.pr);
    dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
    // Reference kernels are orders of magnitude slower than the float path.
    if(std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
    q->prim = dnnl::convolution_forward(pd);
    q->src = pd.src_desc();
    q->dst = pd.dst_desc();
    q->scratch = pd.scratchpad_desc().get_size();
    if((q->reorderSrc = q->src != q->srcUser)) {
      dnnl::reorder::primitive_desc r(eng, q->srcUser, eng, q->src, userScratchpad());
      q->scratch = std::max(q->scratch, r.scratchpad_desc().get_size());
      q->srcMove = dnnl::reorder(r);
    }
    if((q->reorderDst = q->dst != q->dstUser)) {
      dnnl::reorder::primitive_desc r(eng, q->dst, eng, q->dstUser, userScratchpad());
      q->scratch = std::max(q->scratch, r.scratchpad_desc().get_size());
      q->dstMove = dnnl::reorder(r);
    }
    q->weights = memory(pd.weights_desc(), eng);
    memory wm(wUser, eng, const_cast<int8_t*>(w));
    dnnl::reorder(wm, q->weights).execute(threadStream(), wm, q->weights);
    threadStream().wait();
    if(bias) q->biasData.assign(bias, bias + cd.M);
  } catch(const dnnl::error&) {
    return nullptr;
  }
  return q;
}

namespace {

// Points m at p unless it already does (set_data_handle may zero-pad).
void pointAt(memory& m, void* p) {
  if(m.get_data_handle() != p) m.set_data_handle(p);
}

}  // namespace

void dnnlQConvRun(const DnnlQConv& q, const uint8_t* x, int32_t xZeroPoint, void* y, int32_t yZeroPoint) {
  const dnnl::engine& eng = cpuEngine();
  dnnl::stream& strm = threadStream();
  size_t total = ThreadArena::roundUp(std::max<size_t>(q.scratch, 1));
  const size_t srcOff = total;
  if(q.reorderSrc) total += ThreadArena::roundUp(q.src.get_size());
  const size_t dstOff = total;
  if(q.reorderDst) total += ThreadArena::roundUp(q.dst.get_size());
  char* arena = threadArena().reserve(total);
  std::shared_ptr<QConvArgs> entry;
  {
    std::lock_guard<std::mutex> lock(q.mu);
    auto it = q.perThread.find(std::this_thread::get_id());
    if(it != q.perThread.end()) entry = it->second;
  }
  if(!entry) {
    entry = std::make_shared<QConvArgs>();
    QConvArgs& a = *entry;
    a.scratch = memory(memory::desc({int64_t(std::max<size_t>(q.scratch, 1))}, memory::data_type::u8, Tag::a), eng,
                       arena);
    a.srcUser = memory(q.srcUser, eng, const_cast<uint8_t*>(x));
    a.dstUser = memory(q.dstUser, eng, y);
    a.src = q.reorderSrc ? memory(q.src, eng, arena + srcOff) : a.srcUser;
    a.dst = q.reorderDst ? memory(q.dst, eng, arena + dstOff) : a.dstUser;
    // The zero points live in the entry.
    const memory::desc zpMd({1}, memory::data_type::s32, Tag::a);
    a.xzm = memory(zpMd, eng, &a.xz);
    a.yzm = memory(zpMd, eng, &a.yz);
    a.args = {{DNNL_ARG_SRC, a.src},
              {DNNL_ARG_WEIGHTS, q.weights},
              {DNNL_ARG_DST, a.dst},
              {DNNL_ARG_SCRATCHPAD, a.scratch}};
    if(!q.xZeroFixed) a.args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC] = a.xzm;
    if(!q.rawSums) a.args[DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_DST] = a.yzm;
    if(!q.biasData.empty())
      a.args[DNNL_ARG_BIAS] = memory(q.biasMd, eng, const_cast<int32_t*>(q.biasData.data()));
    std::lock_guard<std::mutex> lock(q.mu);
    // Threads that came and went (a server's short-lived ones) do not pile
    // up: past a bound the map starts afresh (entries in use stay alive
    // through their callers' shared_ptr).
    if(q.perThread.size() >= 64) q.perThread.clear();
    q.perThread[std::this_thread::get_id()] = entry;
  }
  QConvArgs& a = *entry;
  pointAt(a.scratch, arena);
  pointAt(a.srcUser, const_cast<uint8_t*>(x));
  pointAt(a.dstUser, y);
  if(q.reorderSrc) pointAt(a.src, arena + srcOff);
  if(q.reorderDst) pointAt(a.dst, arena + dstOff);
  ONYX_ASSERT(!q.xZeroFixed || xZeroPoint == 0, "dnnlQConvRun: made for x zero point 0, called with ", xZeroPoint);
  a.xz = xZeroPoint;
  a.yz = yZeroPoint;
  if(q.reorderSrc)
    q.srcMove.execute(strm, {{DNNL_ARG_FROM, a.srcUser}, {DNNL_ARG_TO, a.src}, {DNNL_ARG_SCRATCHPAD, a.scratch}});
  q.prim.execute(strm, a.args);
  if(q.reorderDst)
    q.dstMove.execute(strm, {{DNNL_ARG_FROM, a.dst}, {DNNL_ARG_TO, a.dstUser}, {DNNL_ARG_SCRATCHPAD, a.scratch}});
  strm.wait();
  gRuns.fetch_add(1, std::memory_order_relaxed);
}

struct DnnlQMatMul {
  dnnl::matmul prim;
  memory::desc a, y;
  memory weights;
  size_t scratch = 0;
};

std::shared_ptr<DnnlQMatMul> dnnlQMatMulPrepare(int64_t rows, int64_t K, int64_t N, const int8_t* w,
                                                bool accumulate) {
  const int64_t lim = int64_t(1) << 31;
  if(rows <= 0 || K <= 0 || N <= 0 || rows * K >= lim || K * N >= lim || rows * N >= lim) return nullptr;
  using dt = memory::data_type;
  const dnnl::engine& eng = cpuEngine();
  auto q = std::make_shared<DnnlQMatMul>();
  try {
    q->a = memory::desc({rows, K}, dt::u8, Tag::ab);
    q->y = memory::desc({rows, N}, dt::s32, Tag::ab);
    dnnl::primitive_attr attr = userScratchpad();
    attr.set_zero_points(DNNL_ARG_SRC, 0, {DNNL_RUNTIME_S32_VAL});
    if(accumulate) {
      dnnl::post_ops po;
      po.append_sum(1.f);
      attr.set_post_ops(po);
    }
    dnnl::matmul::desc d(q->a, memory::desc({K, N}, dt::s8, Tag::any), q->y);
    dnnl::matmul::primitive_desc pd(d, attr, eng);
    if(std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return nullptr;
    q->prim = dnnl::matmul(pd);
    q->scratch = pd.scratchpad_desc().get_size();
    q->weights = memory(pd.weights_desc(), eng);
    memory wm(memory::desc({K, N}, dt::s8, Tag::ab), eng, const_cast<int8_t*>(w));
    dnnl::reorder(wm, q->weights).execute(threadStream(), wm, q->weights);
    threadStream().wait();
  } catch(const dnnl::error&) {
    return nullptr;
  }
  return q;
}

void dnnlQMatMulRun(const DnnlQMatMul& q, const uint8_t* a, int32_t aZeroPoint, int32_t* y) {
  const dnnl::engine& eng = cpuEngine();
  dnnl::stream& strm = threadStream();
  char* arena = threadArena().reserve(ThreadArena::roundUp(std::max<size_t>(q.scratch, 1)));
  memory scratch(memory::desc({int64_t(std::max<size_t>(q.scratch, 1))}, memory::data_type::u8, Tag::a), eng, arena);
  int32_t az = aZeroPoint;
  memory am(q.a, eng, const_cast<uint8_t*>(a)), ym(q.y, eng, y),
      zm(memory::desc({1}, memory::data_type::s32, Tag::a), eng, &az);
  q.prim.execute(strm, {{DNNL_ARG_SRC, am},
                        {DNNL_ARG_WEIGHTS, q.weights},
                        {DNNL_ARG_DST, ym},
                        {DNNL_ARG_SCRATCHPAD, scratch},
                        {DNNL_ARG_ATTR_ZERO_POINTS | DNNL_ARG_SRC, zm}});
  strm.wait();
  gRuns.fetch_add(1, std::memory_order_relaxed);
}

bool dnnlHasVnni() {
  static const bool vnni = [] {
    const unsigned isa = unsigned(dnnl::get_effective_cpu_isa());
    return (isa & unsigned(dnnl_cpu_isa_avx512_core_vnni) & ~unsigned(dnnl_cpu_isa_avx512_core)) != 0 ||
           isa == unsigned(dnnl_cpu_isa_avx2_vnni);
  }();
  return vnni;
}

bool dnnlInt8Exact(int wMaxAbs) { return dnnlHasVnni() || wMaxAbs <= 64; }

Int8PairSplit int8PairSplit(const int32_t* w, int64_t outer, int64_t L, int64_t inner, size_t maxRest) {
  Int8PairSplit r;
  r.main.resize(size_t(outer * L * inner));
  for(int64_t i = 0; i < outer * L * inner; ++i) {
    ONYX_ASSERT(w[i] >= -128 && w[i] <= 127, "int8PairSplit: weight ", w[i], " at ", i, " is not int8");
    r.main[size_t(i)] = int8_t(w[i]);
  }
  auto clamp64 = [](int32_t v) { return std::min(64, std::max(-64, v)); };
  for(int64_t o = 0; o < outer; ++o)
    for(int64_t l = 0; l + 1 < L; l += 2)
      for(int64_t in = 0; in < inner; ++in) {
        const int64_t i0 = (o * L + l) * inner + in, i1 = i0 + inner;
        if(std::abs(w[i0]) + std::abs(w[i1]) <= 128) continue;
        for(const int64_t i : {i0, i1}) {
          const int32_t m = clamp64(w[i]);
          r.main[size_t(i)] = int8_t(m);
          if(w[i] != m) r.rest.push_back({o, i == i0 ? l : l + 1, in, w[i] - m});
        }
        if(r.rest.size() > maxRest) {
          r.tooMany = true;
          return r;
        }
      }
  return r;
}

bool dnnlHasBf16() {
  static const bool bf16 = [] {
    // ONYX_BF16=0 takes the bfloat16 paths away (tests of the fallback).
    const char* e = std::getenv("ONYX_BF16");
    if(e && std::strcmp(e, "0") == 0) return false;
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    return isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx;
  }();
  return bf16 && dnnlEnabled();
}

namespace {

// A matmul of float32 buffers; in bfloat16 A and B are rounded by the
// reorders in (none in float32), C is written in float32 in place.
struct MatmulPrim {
  bool ok = false;
  bool bf16 = false;
  dnnl::matmul prim;
  memory::desc userA, userB, mineA, mineB, c;
  dnnl::reorder moveA, moveB;
  size_t scratch = 0;
};

// op(X) of `rows` x `cols` per batch entry, stored [rows, cols] (or
// [cols, rows] when trans) with row stride ld, entries `stride` apart
// (0: one matrix for every entry, a batch dim of 1 that broadcasts).
memory::desc matrixMd(int64_t batch, int64_t rows, int64_t cols, bool trans, int64_t ld, int64_t stride,
                      memory::data_type t) {
  const int64_t b = stride == 0 ? 1 : batch;
  const int64_t st = stride == 0 ? rows * cols : stride;
  return memory::desc({b, rows, cols}, t, trans ? Dims{st, 1, ld} : Dims{st, ld, 1});
}

MatmulPrim makeMatmulPrim(bool bf16, bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K,
                          float alpha, int64_t lda, int64_t aStride, int64_t ldb, int64_t bStride, float beta,
                          int64_t ldc, int64_t cStride) {
  MatmulPrim p;
  p.bf16 = bf16;
  const dnnl::engine& eng = cpuEngine();
  p.userA = matrixMd(batch, M, K, transA, lda, aStride, kF32);
  p.userB = matrixMd(batch, K, N, transB, ldb, bStride, kF32);
  p.c = matrixMd(batch, M, N, false, ldc, cStride, kF32);
  // The bfloat16 copies keep the operands' orientation: a reorder that also
  // transposes ran 3x slower than the plain conversion (2048 x 2048).
  p.mineA = bf16 ? memory::desc({aStride == 0 ? 1 : batch, M, K}, kBF16, transA ? Tag::acb : Tag::abc) : p.userA;
  p.mineB = bf16 ? memory::desc({bStride == 0 ? 1 : batch, K, N}, kBF16, transB ? Tag::acb : Tag::abc) : p.userB;
  dnnl::primitive_attr attr = userScratchpad();
  if(alpha != 1.f) attr.set_output_scales(0, {alpha});
  if(beta != 0.f) {
    dnnl::post_ops po;
    po.append_sum(beta);
    attr.set_post_ops(po);
  }
  dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(p.mineA, p.mineB, p.c), attr, eng);
  if(std::string(pd.impl_info_str()).rfind("ref", 0) == 0) return p;
  p.scratch = pd.scratchpad_desc().get_size();
  p.prim = dnnl::matmul(pd);
  p.ok = true;
  if(!bf16) return p;
  dnnl::reorder::primitive_desc ra(eng, p.userA, eng, p.mineA, userScratchpad());
  dnnl::reorder::primitive_desc rb(eng, p.userB, eng, p.mineB, userScratchpad());
  p.scratch = std::max({p.scratch, ra.scratchpad_desc().get_size(), rb.scratchpad_desc().get_size()});
  p.moveA = dnnl::reorder(ra);
  p.moveB = dnnl::reorder(rb);
  return p;
}

PrimCacheOf<MatmulPrim>& matmulCache() {
  static PrimCacheOf<MatmulPrim> c;
  return c;
}

bool runMatmul(bool bf16, bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
               const float* A, int64_t lda, int64_t aStride, const float* B, int64_t ldb, int64_t bStride, float beta,
               float* C, int64_t ldc, int64_t cStride) {
  if(!dnnlEnabled() || (bf16 && !dnnlHasBf16()) || batch <= 0 || M <= 0 || N <= 0 || K <= 0) return false;
#ifdef _OPENMP
  // Inside a parallel region the sgemm path is the one that stays on the
  // calling thread.
  if(omp_in_parallel()) return false;
#endif
  // oneDNN's kernels index with int.
  const int64_t lim = int64_t(1) << 31;
  if(batch * M * K >= lim || batch * K * N >= lim || batch * M * N >= lim) return false;
  const std::vector<int64_t> key{bf16,    transA,  batch, M,   N,       K,     floatBits(alpha), lda,
                                 aStride, transB,  ldb,   bStride, floatBits(beta), ldc, cStride, ompThreads()};
  std::shared_ptr<const MatmulPrim> pp = matmulCache().get(key, [&] {
    try {
      return makeMatmulPrim(bf16, transA, transB, batch, M, N, K, alpha, lda, aStride, ldb, bStride, beta, ldc,
                            cStride);
    } catch(const dnnl::error&) {
      return MatmulPrim{};  // cached too: no retry on every call
    }
  });
  const MatmulPrim& p = *pp;
  if(!p.ok) return false;
  const dnnl::engine& eng = cpuEngine();
  dnnl::stream& strm = threadStream();
  memory ua(p.userA, eng, const_cast<float*>(A)), ub(p.userB, eng, const_cast<float*>(B)), c(p.c, eng, C);
  // Arena: the scratchpad, then (bfloat16) the rounded A and B.
  const size_t offA = ThreadArena::roundUp(std::max<size_t>(p.scratch, 1));
  const size_t offB = offA + (p.bf16 ? ThreadArena::roundUp(p.mineA.get_size()) : 0);
  char* arena = threadArena().reserve(offB + (p.bf16 ? p.mineB.get_size() : 0));
  memory scratch(memory::desc({int64_t(std::max<size_t>(p.scratch, 1))}, memory::data_type::u8, Tag::a), eng,
                 arena);
  memory ma = ua, mb = ub;
  if(p.bf16) {
    ma = memory(p.mineA, eng, arena + offA);
    mb = memory(p.mineB, eng, arena + offB);
    p.moveA.execute(strm, {{DNNL_ARG_FROM, ua}, {DNNL_ARG_TO, ma}, {DNNL_ARG_SCRATCHPAD, scratch}});
    p.moveB.execute(strm, {{DNNL_ARG_FROM, ub}, {DNNL_ARG_TO, mb}, {DNNL_ARG_SCRATCHPAD, scratch}});
  }
  p.prim.execute(strm, {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, mb}, {DNNL_ARG_DST, c}, {DNNL_ARG_SCRATCHPAD, scratch}});
  strm.wait();
  return true;
}

}  // namespace

bool dnnlMatmulBf16(bool transA, bool transB, int64_t batch, int64_t M, int64_t N, int64_t K, float alpha,
                    const float* A, int64_t lda, int64_t aStride, const float* B, int64_t ldb, int64_t bStride,
                    float beta, float* C, int64_t ldc, int64_t cStride) {
  return runMatmul(true, transA, transB, batch, M, N, K, alpha, A, lda, aStride, B, ldb, bStride, beta, C, ldc,
                   cStride);
}

bool dnnlMatmulF32(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                   int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  return runMatmul(false, transA, transB, 1, M, N, K, alpha, A, lda, 0, B, ldb, 0, beta, C, ldc, 0);
}

namespace {

}  // namespace

bool dnnlConvForward(const ConvDims& cd, int nd, const float* x, const float* w, const float* b, float* y,
                     const ConvEpilogue* epilogue, DnnlWeightSlot* slot, ConvLayouts layouts, bool bf16) {
  const float* ptr[3] = {x, w, y};
  return run(Kind::Forward, cd, nd, ptr, b, epilogue, slot, layouts, bf16);
}

int dnnlChannelBlock() {
  if(!dnnlEnabled()) return 0;
  static const int block = [] {
    const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
    if(isa == dnnl::cpu_isa::avx512_core || isa == dnnl::cpu_isa::avx512_core_vnni ||
       isa == dnnl::cpu_isa::avx512_core_bf16 || isa == dnnl::cpu_isa::avx512_core_amx)
      return 16;
    if(isa == dnnl::cpu_isa::avx2 || isa == dnnl::cpu_isa::avx2_vnni) return 8;
    return 0;
  }();
  return block;
}

void dnnlReorderChannels(const float* from, int fromBlock, float* to, int toBlock, int64_t N, int64_t C, int64_t H,
                         int64_t W) {
  const dnnl::engine& eng = cpuEngine();
  dnnl::stream& strm = threadStream();
  const Dims dims{N, C, H, W};
  auto md = [&](int b) { return memory::desc(dims, kF32, b ? blockedTag(b) : Tag::abcd); };
  memory src(md(fromBlock), eng, const_cast<float*>(from)), dst(md(toBlock), eng, to);
  dnnl::reorder(src, dst).execute(strm, src, dst);
  strm.wait();
}

bool dnnlConvTransposed(const ConvDims& cd, int nd, const float* x, const float* w, const float* b, float* y,
                        const ConvEpilogue* epilogue, DnnlWeightSlot* slot, bool bf16) {
  const float* ptr[3] = {y, w, x};
  return run(Kind::Transposed, cd, nd, ptr, b, epilogue, slot, {}, bf16);
}

bool dnnlConvGradWeight(const ConvDims& cd, int nd, const float* x, const float* dy, float* dw, bool bf16) {
  const float* ptr[3] = {x, dw, dy};
  return run(Kind::GradWeight, cd, nd, ptr, nullptr, nullptr, nullptr, {}, bf16);
}

namespace {
// Runs a primitive of one float32 source and one destination described by md.
void runSrcDst(const dnnl::primitive& prim, const memory::desc& md, const float* x, float* y) {
  const dnnl::engine& eng = cpuEngine();
  memory xm(md, eng, const_cast<float*>(x)), ym(md, eng, y);
  dnnl::stream& strm = threadStream();
  prim.execute(strm, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DST, ym}});
  strm.wait();
}
}  // namespace

bool dnnlGelu(bool tanhForm, const float* x, float* y, int64_t n) {
  if(!dnnlEnabled() || n <= 0 || n >= (int64_t(1) << 31)) return false;
  // One primitive per form and length, per calling thread (a model has a few
  // lengths; the map is cleared past 64 of them). A declined one is kept as
  // an empty primitive, so it is not asked again.
  thread_local std::unordered_map<int64_t, std::shared_ptr<dnnl::eltwise_forward>> made[2];
  auto& cache = made[tanhForm ? 1 : 0];
  auto it = cache.find(n);
  if(it == cache.end()) {
    if(cache.size() >= 64) cache.clear();
    std::shared_ptr<dnnl::eltwise_forward> prim;
    try {
      const memory::desc md({n}, memory::data_type::f32, Tag::a);
      const auto alg = tanhForm ? dnnl::algorithm::eltwise_gelu_tanh : dnnl::algorithm::eltwise_gelu_erf;
      dnnl::eltwise_forward::primitive_desc pd(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_inference, alg, md, 0.f, 0.f), cpuEngine());
      if(std::string(pd.impl_info_str()).rfind("ref", 0) != 0) prim = std::make_shared<dnnl::eltwise_forward>(pd);
    } catch(const dnnl::error&) {
    }
    it = cache.emplace(n, prim).first;
  }
  if(!it->second) return false;
  runSrcDst(*it->second, memory::desc({n}, memory::data_type::f32, Tag::a), x, y);
  return true;
}

bool dnnlGeluGrad(bool tanhForm, const float* dy, const float* x, float* dx, int64_t n) {
  if(!dnnlEnabled() || n <= 0 || n >= (int64_t(1) << 31)) return false;
  // Cached as dnnlGelu's: per form and length, per calling thread.
  thread_local std::unordered_map<int64_t, std::shared_ptr<dnnl::eltwise_backward>> made[2];
  auto& cache = made[tanhForm ? 1 : 0];
  auto it = cache.find(n);
  const memory::desc md({n}, memory::data_type::f32, Tag::a);
  if(it == cache.end()) {
    if(cache.size() >= 64) cache.clear();
    std::shared_ptr<dnnl::eltwise_backward> prim;
    try {
      const auto alg = tanhForm ? dnnl::algorithm::eltwise_gelu_tanh : dnnl::algorithm::eltwise_gelu_erf;
      dnnl::eltwise_forward::primitive_desc hint(
          dnnl::eltwise_forward::desc(dnnl::prop_kind::forward_training, alg, md, 0.f, 0.f), cpuEngine());
      dnnl::eltwise_backward::primitive_desc pd(dnnl::eltwise_backward::desc(alg, md, md, 0.f, 0.f), cpuEngine(),
                                                hint);
      if(std::string(pd.impl_info_str()).rfind("ref", 0) != 0) prim = std::make_shared<dnnl::eltwise_backward>(pd);
    } catch(const dnnl::error&) {
    }
    it = cache.emplace(n, prim).first;
  }
  if(!it->second) return false;
  const dnnl::engine& eng = cpuEngine();
  memory xm(md, eng, const_cast<float*>(x)), dym(md, eng, const_cast<float*>(dy)), dxm(md, eng, dx);
  dnnl::stream& strm = threadStream();
  it->second->execute(strm, {{DNNL_ARG_SRC, xm}, {DNNL_ARG_DIFF_DST, dym}, {DNNL_ARG_DIFF_SRC, dxm}});
  strm.wait();
  return true;
}

bool dnnlSoftmax(bool logOut, const float* x, float* y, int64_t outer, int64_t n, int64_t inner) {
  // The sizes are a tensor's (their product is bounded); oneDNN takes int.
  if(!dnnlEnabled() || outer <= 0 || n <= 0 || inner <= 0 || outer * n * inner >= (int64_t(1) << 31)) return false;
  // One primitive per shape and form, per calling thread (cleared past 64).
  struct Key {
    int64_t outer, n, inner;
    bool log;
    bool operator==(const Key& o) const { return outer == o.outer && n == o.n && inner == o.inner && log == o.log; }
  };
  struct Hash {
    size_t operator()(const Key& k) const {
      return std::hash<int64_t>()(k.outer * 1000003 + k.n * 131 + k.inner * 7 + (k.log ? 1 : 0));
    }
  };
  thread_local std::unordered_map<Key, std::shared_ptr<dnnl::primitive>, Hash> made;
  const Key key{outer, n, inner, logOut};
  auto it = made.find(key);
  const memory::desc md({outer, n, inner}, memory::data_type::f32, Tag::abc);
  if(it == made.end()) {
    if(made.size() >= 64) made.clear();
    std::shared_ptr<dnnl::primitive> prim;
    try {
      const auto kind = dnnl::prop_kind::forward_inference;
      auto fast = [](const dnnl::primitive_desc_base& pd) {
        return std::string(pd.impl_info_str()).rfind("ref", 0) != 0;
      };
      if(logOut) {
        dnnl::logsoftmax_forward::primitive_desc pd(dnnl::logsoftmax_forward::desc(kind, md, 1), cpuEngine());
        if(fast(pd)) prim = std::make_shared<dnnl::logsoftmax_forward>(pd);
      } else {
        dnnl::softmax_forward::primitive_desc pd(dnnl::softmax_forward::desc(kind, md, 1), cpuEngine());
        if(fast(pd)) prim = std::make_shared<dnnl::softmax_forward>(pd);
      }
    } catch(const dnnl::error&) {
    }
    it = made.emplace(key, prim).first;
  }
  if(!it->second) return false;
  runSrcDst(*it->second, md, x, y);
  return true;
}

bool dnnlEnabled() { return enabledFlag().load(); }

void setDnnlEnabled(bool on) { enabledFlag().store(on); }

void setDnnlLayout(DnnlLayout l) { gLayout.store(int(l)); }

uint64_t dnnlConvRuns() { return gRuns.load(std::memory_order_relaxed); }
uint64_t dnnlChannelsTransposes() { return gTransposes.load(std::memory_order_relaxed); }

}  // namespace host
}  // namespace onyx
