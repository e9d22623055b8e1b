// Convolution and pooling through cuDNN (kernels.h) where cuDNN takes the
// case: float types, pads the same at both ends. Otherwise these functions
// return false and the plugin runs its own kernels (im2col + cuBLAS, a
// thread per pooled output), which take everything the CPU takes. Built
// when CMake finds cuDNN; no_cudnn.cpp stands in otherwise.
//
// The algorithm is chosen once per shape (cuDNN's heuristics: the first
// one that succeeds within the workspace limit, in the math the CPU's
// precision allows: no TF32 for float32) and kept with its descriptors in
// a process-wide cache; the workspace comes from the graph's workspace.
// ONYX_CUDNN=0 in the environment turns cuDNN off (for comparisons).
#include <onyx/backend/cuda/kernels.h>

#include <climits>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include <cudnn.h>

#include <onyx/backend/cuda/common.cuh>

namespace onyx {
namespace cuda {

bool cudnnAvailable() {
  static const bool on = [] {
    const char* v = std::getenv("ONYX_CUDNN");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

namespace {

constexpr size_t kMaxWorkspace = size_t(1) << 30;  // 1 GiB

void check(cudnnStatus_t s, const char* call, size_t dev) {
  ONYX_CHECK(s == CUDNN_STATUS_SUCCESS, "gpu", dev, ": ", call, " failed: ", cudnnGetErrorString(s));
}

// One handle per thread and device (a cuDNN handle is not for concurrent
// use), bound to the device's stream.
cudnnHandle_t handle(size_t dev) {
  cudaStream_t s = launchOn(dev);
  thread_local std::vector<cudnnHandle_t> handles;
  if(handles.size() <= dev) handles.resize(dev + 1, nullptr);
  if(!handles[dev]) {
    check(cudnnCreate(&handles[dev]), "cudnnCreate", dev);
    check(cudnnSetStream(handles[dev], s), "cudnnSetStream", dev);
  }
  return handles[dev];
}

struct CudnnTypes {
  cudnnDataType_t data, compute;
  cudnnMathType_t math;
  bool f64;  // alpha/beta as double
};

bool typesOf(Type t, CudnnTypes& c) {
  switch(t) {
    case Type::float32: c = {CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH, false}; return true;
    case Type::float64: c = {CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, CUDNN_FMA_MATH, true}; return true;
    case Type::float16: c = {CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, false}; return true;
    case Type::bfloat16: c = {CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH, false}; return true;
    default: return false;
  }
}

// Which of cuDNN's three convolution calls a plan is for.
enum class Pass { forward, data, filter };

// Descriptors and algorithm of one convolution shape and pass; ok false
// when cuDNN does not take it (then the caller's fallback runs, every time).
struct ConvPlan {
  bool ok = false;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  int algo = 0;  // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
  size_t workspace = 0;
  bool f64 = false;
};

bool fitsInt(int64_t v) { return v >= 0 && v <= INT_MAX; }

// The real spatial dims are the last nd of g's three (1-D runs as 2-D);
// false when an axis pads its ends differently (cuDNN pads both alike).
bool spatialOf(const host::ConvGeom& g, int& nd) {
  nd = (g.img[0] == 1 && g.k[0] == 1 && g.pos[0] == 1 && g.pb[0] == 0 && g.pe[0] == 0) ? 2 : 3;
  for(int a = 3 - nd; a < 3; ++a)
    if(g.pb[a] != g.pe[a]) return false;
  return true;
}

// g's sizes, for the key of a plan cache.
void putGeom(std::ostringstream& k, const host::ConvGeom& g) {
  for(int a = 0; a < 3; ++a)
    k << ' ' << g.img[a] << ' ' << g.pos[a] << ' ' << g.k[a] << ' ' << g.s[a] << ' ' << g.d[a] << ' ' << g.pb[a] << ' '
      << g.pe[a];
}

// Row-major strides of dims d.
std::vector<int> contiguous(const std::vector<int>& d) {
  std::vector<int> s(d.size(), 1);
  for(size_t i = d.size() - 1; i-- > 0;) s[i] = s[i + 1] * d[i + 1];
  return s;
}

void setTensor(cudnnTensorDescriptor_t& t, cudnnDataType_t type, const std::vector<int>& dims, size_t dev) {
  if(!t) check(cudnnCreateTensorDescriptor(&t), "cudnnCreateTensorDescriptor", dev);
  check(cudnnSetTensorNdDescriptor(t, type, int(dims.size()), dims.data(), contiguous(dims).data()),
        "cudnnSetTensorNdDescriptor", dev);
}

// The first of cuDNN's ranked algorithms that succeeds within the
// workspace limit, in the math allowed (no TF32 where the CPU has none),
// and (the backward passes, for reproducible training) deterministic.
template <class Perf>
bool pick(ConvPlan& p, const Perf* perf, int found, cudnnMathType_t math, bool needDeterministic, size_t dev) {
  for(int i = 0; i < found; ++i) {
    const Perf& q = perf[i];
    if(q.status != CUDNN_STATUS_SUCCESS || q.memory > kMaxWorkspace) continue;
    if(math == CUDNN_FMA_MATH && q.mathType != CUDNN_FMA_MATH) continue;
    if(needDeterministic && q.determinism != CUDNN_DETERMINISTIC) continue;
    p.algo = static_cast<int>(q.algo);
    p.workspace = q.memory;
    check(cudnnSetConvolutionMathType(p.conv, q.mathType), "cudnnSetConvolutionMathType", dev);
    return true;
  }
  return false;
}

// x [N, C, img], w [M, C / G, k], y [N, M, pos]: the forward convolution's
// tensors, which the backward passes share.
void makePlan(ConvPlan& p, Pass pass, size_t dev, Type t, int64_t N, int64_t C, int64_t M, int64_t G,
              const host::ConvGeom& g) {
  CudnnTypes ct;
  if(!typesOf(t, ct)) return;
  p.f64 = ct.f64;
  int nd;
  if(!spatialOf(g, nd)) return;
  const int first = 3 - nd;
  for(int64_t v : {N, C, M, G, N * C * g.imgSize, N * M * g.posSize})
    if(!fitsInt(v)) return;
  std::vector<int> xd{int(N), int(C)}, wd{int(M), int(C / G)}, yd{int(N), int(M)}, pad, str, dil;
  for(int a = first; a < 3; ++a) {
    xd.push_back(int(g.img[a]));
    wd.push_back(int(g.k[a]));
    yd.push_back(int(g.pos[a]));
    pad.push_back(int(g.pb[a]));
    str.push_back(int(g.s[a]));
    dil.push_back(int(g.d[a]));
  }
  const int r = nd + 2;
  check(cudnnCreateFilterDescriptor(&p.w), "cudnnCreateFilterDescriptor", dev);
  check(cudnnCreateConvolutionDescriptor(&p.conv), "cudnnCreateConvolutionDescriptor", dev);
  setTensor(p.x, ct.data, xd, dev);
  check(cudnnSetFilterNdDescriptor(p.w, ct.data, CUDNN_TENSOR_NCHW, r, wd.data()), "cudnnSetFilterNdDescriptor", dev);
  check(cudnnSetConvolutionNdDescriptor(p.conv, nd, pad.data(), str.data(), dil.data(), CUDNN_CROSS_CORRELATION,
                                        ct.compute),
        "cudnnSetConvolutionNdDescriptor", dev);
  check(cudnnSetConvolutionGroupCount(p.conv, int(G)), "cudnnSetConvolutionGroupCount", dev);
  check(cudnnSetConvolutionMathType(p.conv, ct.math), "cudnnSetConvolutionMathType", dev);
  std::vector<int> od(size_t(r), 0);
  if(cudnnGetConvolutionNdForwardOutputDim(p.conv, p.x, p.w, r, od.data()) != CUDNN_STATUS_SUCCESS || od != yd)
    return;  // cuDNN would size the output otherwise: fall back
  setTensor(p.y, ct.data, yd, dev);
  int found = 0;
  cudnnHandle_t h = handle(dev);
  switch(pass) {
    case Pass::forward: {
      cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
      check(cudnnGetConvolutionForwardAlgorithm_v7(h, p.x, p.w, p.conv, p.y, CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found,
                                                   perf),
            "cudnnGetConvolutionForwardAlgorithm_v7", dev);
      p.ok = pick(p, perf, found, ct.math, false, dev);
      return;
    }
    case Pass::data: {
      cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
      check(cudnnGetConvolutionBackwardDataAlgorithm_v7(h, p.w, p.y, p.conv, p.x,
                                                        CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &found, perf),
            "cudnnGetConvolutionBackwardDataAlgorithm_v7", dev);
      p.ok = pick(p, perf, found, ct.math, true, dev);
      return;
    }
    case Pass::filter: {
      cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
      check(cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, p.x, p.y, p.conv, p.w,
                                                          CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &found, perf),
            "cudnnGetConvolutionBackwardFilterAlgorithm_v7", dev);
      p.ok = pick(p, perf, found, ct.math, true, dev);
      return;
    }
  }
}

const ConvPlan& planFor(Pass pass, size_t dev, Type t, int64_t N, int64_t C, int64_t M, int64_t G,
                        const host::ConvGeom& g) {
  std::ostringstream k;
  k << int(pass) << ' ' << dev << ' ' << int(t) << ' ' << N << ' ' << C << ' ' << M << ' ' << G;
  putGeom(k, g);
  static std::mutex m;
  static std::map<std::string, ConvPlan> plans;  // never erased: references stay valid
  std::lock_guard<std::mutex> lock(m);
  auto it = plans.find(k.str());
  if(it != plans.end()) return it->second;
  ConvPlan& p = plans[k.str()];
  makePlan(p, pass, dev, t, N, C, M, G, g);
  return p;
}

// The plan of a pass where cuDNN takes it (null otherwise), with its
// workspace and alpha = 1, beta = 0 in the type cuDNN wants.
struct Call {
  const ConvPlan* p = nullptr;
  void* ws = nullptr;
  double one = 1, zero = 0;
  float onef = 1, zerof = 0;
  const void* alpha() const { return p->f64 ? static_cast<const void*>(&one) : &onef; }
  const void* beta() const { return p->f64 ? static_cast<const void*>(&zero) : &zerof; }
};
bool prepare(Call& c, Pass pass, size_t dev, Type t, int64_t N, int64_t C, int64_t M, int64_t G,
             const host::ConvGeom& g, const std::function<void*(size_t)>& workspace) {
  if(!cudnnAvailable() || N == 0 || M == 0 || C == 0) return false;
  const ConvPlan& p = planFor(pass, dev, t, N, C, M, G, g);
  if(!p.ok) return false;
  c.p = &p;
  c.ws = p.workspace ? workspace(p.workspace) : nullptr;
  return true;
}

// Pooling over `planes` = N * C planes as a [planes, 1, img] tensor: the
// descriptors of one shape and mode; ok false when cuDNN does not take it.
struct PoolPlan {
  bool ok = false;
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
  bool f64 = false;
};

void makePoolPlan(PoolPlan& p, size_t dev, Type t, int64_t planes, const host::ConvGeom& g, PoolMode mode) {
  CudnnTypes ct;
  if(!typesOf(t, ct)) return;
  p.f64 = ct.f64;
  int nd;
  if(!spatialOf(g, nd)) return;
  const int first = 3 - nd;
  for(int a = first; a < 3; ++a)
    if(g.d[a] != 1) return;  // cuDNN pools without dilation
  for(int64_t v : {planes, planes * g.imgSize, planes * g.posSize})
    if(!fitsInt(v)) return;
  std::vector<int> xd{int(planes), 1}, yd{int(planes), 1}, win, pad, str;
  for(int a = first; a < 3; ++a) {
    xd.push_back(int(g.img[a]));
    yd.push_back(int(g.pos[a]));
    win.push_back(int(g.k[a]));
    pad.push_back(int(g.pb[a]));
    str.push_back(int(g.s[a]));
  }
  const int r = nd + 2;
  const cudnnPoolingMode_t m = mode == PoolMode::max ? CUDNN_POOLING_MAX
                               : mode == PoolMode::averageIncludePad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                                     : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
  check(cudnnCreatePoolingDescriptor(&p.pool), "cudnnCreatePoolingDescriptor", dev);
  setTensor(p.x, ct.data, xd, dev);
  // NaN propagates: the CPU's max counts NaN as the largest value.
  check(cudnnSetPoolingNdDescriptor(p.pool, m, CUDNN_PROPAGATE_NAN, nd, win.data(), pad.data(), str.data()),
        "cudnnSetPoolingNdDescriptor", dev);
  std::vector<int> od(size_t(r), 0);
  if(cudnnGetPoolingNdForwardOutputDim(p.pool, p.x, r, od.data()) != CUDNN_STATUS_SUCCESS || od != yd)
    return;  // ceil_mode and the like: cuDNN would size the output otherwise
  setTensor(p.y, ct.data, yd, dev);
  p.ok = true;
}

}  // namespace

bool cudnnPool(size_t dev, Type t, const void* x, void* y, int64_t planes, const host::ConvGeom& g, PoolMode mode) {
  if(!cudnnAvailable() || planes == 0) return false;
  std::ostringstream k;
  k << dev << ' ' << int(t) << ' ' << planes << ' ' << int(mode);
  putGeom(k, g);
  static std::mutex m;
  static std::map<std::string, PoolPlan> plans;  // never erased: references stay valid
  const PoolPlan* p;
  {
    std::lock_guard<std::mutex> lock(m);
    auto it = plans.find(k.str());
    if(it == plans.end()) {
      it = plans.emplace(k.str(), PoolPlan()).first;
      makePoolPlan(it->second, dev, t, planes, g, mode);
    }
    p = &it->second;
  }
  if(!p->ok) return false;
  const double one = 1, zero = 0;
  const float onef = 1, zerof = 0;
  check(cudnnPoolingForward(handle(dev), p->pool, p->f64 ? static_cast<const void*>(&one) : &onef, p->x, x,
                            p->f64 ? static_cast<const void*>(&zero) : &zerof, p->y, y),
        "cudnnPoolingForward", dev);
  return true;
}

bool cudnnConvForward(size_t dev, Type t, const void* x, const void* w, void* y, int64_t N, int64_t C, int64_t M,
                      int64_t G, const host::ConvGeom& g, const std::function<void*(size_t)>& workspace) {
  Call c;
  if(!prepare(c, Pass::forward, dev, t, N, C, M, G, g, workspace)) return false;
  const ConvPlan& p = *c.p;
  check(cudnnConvolutionForward(handle(dev), c.alpha(), p.x, x, p.w, w, p.conv,
                                static_cast<cudnnConvolutionFwdAlgo_t>(p.algo), c.ws, p.workspace, c.beta(), p.y, y),
        "cudnnConvolutionForward", dev);
  return true;
}

bool cudnnConvBackwardData(size_t dev, Type t, const void* w, const void* dy, void* dx, int64_t N, int64_t C,
                           int64_t M, int64_t G, const host::ConvGeom& g,
                           const std::function<void*(size_t)>& workspace) {
  Call c;
  if(!prepare(c, Pass::data, dev, t, N, C, M, G, g, workspace)) return false;
  const ConvPlan& p = *c.p;
  check(cudnnConvolutionBackwardData(handle(dev), c.alpha(), p.w, w, p.y, dy, p.conv,
                                     static_cast<cudnnConvolutionBwdDataAlgo_t>(p.algo), c.ws, p.workspace, c.beta(),
                                     p.x, dx),
        "cudnnConvolutionBackwardData", dev);
  return true;
}

bool cudnnConvBackwardFilter(size_t dev, Type t, const void* x, const void* dy, void* dw, int64_t N, int64_t C,
                             int64_t M, int64_t G, const host::ConvGeom& g,
                             const std::function<void*(size_t)>& workspace) {
  Call c;
  if(!prepare(c, Pass::filter, dev, t, N, C, M, G, g, workspace)) return false;
  const ConvPlan& p = *c.p;
  check(cudnnConvolutionBackwardFilter(handle(dev), c.alpha(), p.x, x, p.y, dy, p.conv,
                                       static_cast<cudnnConvolutionBwdFilterAlgo_t>(p.algo), c.ws, p.workspace,
                                       c.beta(), p.w, dw),
        "cudnnConvolutionBackwardFilter", dev);
  return true;
}


}  // namespace cuda
}  // namespace onyx
