#include "ops/harness.h"

#include <onyx/core/device_backend.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <set>

#include <unistd.h>

namespace onyx {
namespace test {

std::vector<OpCase>& cases() {
  static std::vector<OpCase> c;
  return c;
}

Ref refOfShape(std::vector<int64_t> shape) {
  Ref r;
  r.shape = std::move(shape);
  int64_t n = 1;
  for(auto d : r.shape) n *= d;
  r.v.assign(static_cast<size_t>(n), 0.0);
  return r;
}

Ref refLike(const Ref& a) { return refOfShape(a.shape); }

std::vector<int64_t> refStrides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for(int i = static_cast<int>(shape.size()) - 2; i >= 0; --i) s[i] = s[i + 1] * shape[i + 1];
  return s;
}

Ref refBroadcast(const std::vector<Ref>& ins, const std::function<double(const std::vector<double>&)>& f) {
  size_t rank = 0;
  for(auto& r : ins) rank = std::max(rank, r.shape.size());
  std::vector<int64_t> out(rank, 1);
  for(auto& r : ins)
    for(size_t i = 0; i < r.shape.size(); ++i) {
      int64_t& o = out[rank - r.shape.size() + i];
      if(r.shape[i] != 1) o = r.shape[i];
    }
  Ref y = refOfShape(out);
  auto os = refStrides(out);
  std::vector<double> args(ins.size());
  for(int64_t k = 0; k < y.size(); ++k) {
    for(size_t j = 0; j < ins.size(); ++j) {
      const Ref& r = ins[j];
      auto st = refStrides(r.shape);
      int64_t off = 0;
      for(size_t i = 0; i < r.shape.size(); ++i) {
        size_t oi = rank - r.shape.size() + i;
        int64_t idx = (k / os[oi]) % out[oi];
        off += (r.shape[i] == 1 ? 0 : idx) * st[i];
      }
      args[j] = r[off];
    }
    y[k] = f(args);
  }
  return y;
}

Ref refMap(const std::vector<Ref>& ins, double (*f)(double)) {
  return refBroadcast(ins, [f](const std::vector<double>& a) { return f(a[0]); });
}

std::pair<std::vector<double>, std::vector<double>> gradsOfSum(Expr (*f)(Expr, Expr), std::vector<double> a,
                                                               std::vector<double> b) {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  auto pa = g->param("a", {int64_t(a.size())}, inits::fromVector(a), Type::float64, true);
  auto pb = g->param("b", {int64_t(b.size())}, inits::fromVector(b), Type::float64, true);
  auto loss = sum(f(pa, pb));
  g->forward();
  g->backward(loss);
  std::pair<std::vector<double>, std::vector<double>> r;
  pa->grad()->get(r.first);
  pb->grad()->get(r.second);
  return r;
}

void expectErrorMentioning(const std::function<void()>& f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one mentioning '" << needle << "'";
  } catch(const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

namespace {

std::vector<Ref> makeInputs(const OpCase& c, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Ref> r;
  for(auto& s : c.inputs) {
    Ref x = refOfShape(s.shape);
    if(!s.values.empty()) {
      EXPECT_EQ(static_cast<int64_t>(s.values.size()), x.size()) << c.op << "/" << c.name << ": explicit values";
      x.v = s.values;
    } else if(s.integer) {
      std::uniform_int_distribution<int64_t> d(static_cast<int64_t>(s.lo), static_cast<int64_t>(s.hi));
      for(auto& v : x.v) v = static_cast<double>(d(rng));
    } else if(s.boolean) {
      std::bernoulli_distribution d(0.5);
      for(auto& v : x.v) v = d(rng) ? 1 : 0;
    } else {
      std::uniform_real_distribution<double> d(s.lo, s.hi);
      for(auto& v : x.v) v = d(rng);
    }
    r.push_back(std::move(x));
  }
  return r;
}

Type inputType(const InputSpec& s, Type floatType) {
  return s.integer ? Type::int64 : s.boolean ? Type::boolean : floatType;
}

// Builds the case's graph with inputs as params (float ones trainable).
struct Built {
  Ptr<ExpressionGraph> g;
  std::vector<Expr> xs;
  Expr y;
};

Built build(const OpCase& c, const std::vector<Ref>& ins, Type ft, bool trainable, DeviceId device = cpu()) {
  Built b;
  b.g = New<ExpressionGraph>();
  b.g->setDevice(device);
  b.g->setDefaultElementType(ft);
  for(size_t i = 0; i < ins.size(); ++i) {
    const InputSpec& s = c.inputs[i];
    Type t = inputType(s, ft);
    Shape shape(ins[i].shape);
    bool train = trainable && s.differentiable && !s.integer && !s.boolean;
    if(train)
      b.xs.push_back(b.g->param("x" + std::to_string(i), shape, inits::fromVector(ins[i].v), t, true));
    else
      b.xs.push_back(b.g->constant(shape, inits::fromVector(ins[i].v), t));
  }
  b.y = c.build(b.xs);
  return b;
}

Ref toRef(const Tensor& t) {
  Ref r;
  r.shape = t->shape().vec();
  t->get(r.v);
  return r;
}

void compare(const OpCase& c, const Ref& got, const Ref& want, double rtol, double atol, const char* what) {
  ASSERT_EQ(got.shape, want.shape) << c.op << "/" << c.name << " " << what << ": output shape";
  for(int64_t i = 0; i < got.size(); ++i) {
    double g = got[i], w = want[i];
    if(std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << c.op << "/" << c.name << " " << what << " [" << i << "]";
      continue;
    }
    if(std::isinf(w)) {
      EXPECT_EQ(g, w) << c.op << "/" << c.name << " " << what << " [" << i << "]";
      continue;
    }
    ASSERT_NEAR(g, w, atol + rtol * std::fabs(w)) << c.op << "/" << c.name << " " << what << " element " << i;
  }
}

Ref runForward(const OpCase& c, const std::vector<Ref>& ins, Type ft) {
  Built b = build(c, ins, ft, false);
  b.g->forward();
  return toRef(b.y->val());
}

double weightedLoss(const Ref& y, const Ref& w) {
  double s = 0;
  for(int64_t i = 0; i < y.size(); ++i) s += y[i] * w[i];
  return s;
}

class OpHarness : public ::testing::TestWithParam<size_t> {};

TEST_P(OpHarness, ForwardAndGradient) {
  const OpCase& c = cases()[GetParam()];
  auto ins = makeInputs(c, 42 + GetParam());

  // Forward, float64 and float32, against the reference.
  Ref out64 = runForward(c, ins, Type::float64);
  if(c.stochastic) {
    ASSERT_TRUE(c.check) << c.op << "/" << c.name << ": a stochastic case needs a check";
    c.check(out64, ins);
  } else {
    ASSERT_TRUE(c.reference) << c.op << "/" << c.name << ": no reference";
    Ref want = c.reference(ins);
    compare(c, out64, want, 1e-10, 1e-10, "float64 forward");
    // float32: the reference sees the inputs rounded to float32 too.
    std::vector<Ref> ins32 = ins;
    for(size_t i = 0; i < ins32.size(); ++i)
      for(auto& v : ins32[i].v) v = static_cast<double>(static_cast<float>(v));
    Ref out32 = runForward(c, ins32, Type::float32);
    compare(c, out32, c.reference(ins32), c.rtol, c.atol, "float32 forward");
  }

  const OpDef& op = Registry::instance().get(c.op);
  // Cases without a gradient check are allowed; OpRegistry.DifferentiableOpsAreGradientChecked
  // makes sure every differentiable op has at least one case with it.
  if(!c.gradcheck) return;
  ASSERT_TRUE(op.differentiable()) << c.op << " has no backward but the case asks for a gradient check";

  // Gradient check in float64: loss = sum(y * w).
  Built b = build(c, ins, Type::float64, true);
  Ref w = refOfShape(b.y->shape().vec());
  std::mt19937_64 rng(7 + GetParam());
  std::uniform_real_distribution<double> d(-1, 1);
  for(auto& v : w.v) v = d(rng);
  auto wc = b.g->constant(b.y->shape(), inits::fromVector(w.v), Type::float64);
  auto loss = sum(b.y * wc);
  b.g->forward();
  b.g->backward(loss);
  int checked = 0;
  const double eps = 1e-6;
  for(size_t i = 0; i < ins.size(); ++i) {
    const InputSpec& s = c.inputs[i];
    if(!s.differentiable || s.integer || s.boolean) continue;
    Ref analytic = toRef(b.xs[i]->grad());
    for(int64_t j = 0; j < ins[i].size(); ++j) {
      auto plus = ins, minus = ins;
      plus[i][j] += eps;
      minus[i][j] -= eps;
      double num = (weightedLoss(runForward(c, plus, Type::float64), w) -
                    weightedLoss(runForward(c, minus, Type::float64), w)) / (2 * eps);
      ASSERT_NEAR(analytic[j], num, c.gradTol + 1e-4 * std::fabs(num))
          << c.op << "/" << c.name << ": d loss / d input" << i << "[" << j << "]";
      ++checked;
    }
  }
  EXPECT_GT(checked, 0) << c.op << "/" << c.name << ": gradient check covered no input";
}

// ---- The GPU against the CPU (issue 6): every case's forward (float32, the
// case's tolerance) and the gradients of its float inputs (float64) on gpu0
// must match the CPU's. Without a usable GPU the test reports itself skipped
// with the reason; on a GPU machine every op without a GPU kernel yet fails
// here, by name.
// Registry ops without a GPU kernel yet, with what each waits for. The list
// only shrinks: PendingListIsExact fails when an op gains a GPU kernel (take
// it out here) and when a new op comes without one. Empty now: every op
// runs on the GPU.
const std::map<std::string, std::string>& gpuPending() {
  static const std::map<std::string, std::string> pending = {};
  return pending;
}

// Every op has a GPU kernel once the CUDA plugin has loaded (it grafts them
// on; it loads without a driver too, so CI checks this), except those
// pending above. Ops whose GPU kernel runs the CPU's on host copies declare
// it on the op with the reason (OpDef::gpuOnHost): random ops by design,
// the others until they have a GPU form (the reason says which).
TEST(OpHarnessGpu, PendingListIsExact) {
  const std::string why = loadGpuBackend();
  if(!ONYX_TEST_CUDA_BUILT) GTEST_SKIP() << "GPU check not run: " << why;
  ASSERT_EQ(why, "") << "the CUDA plugin was built but does not load";
  std::set<std::string> lacking;
  std::map<std::string, std::string> onHost;
  for(const OpDef* op : Registry::instance().all()) {
    if(!op->kernels[static_cast<int>(DeviceType::gpu)]) lacking.insert(op->name);
    if(!op->gpuOnHostWhy.empty()) onHost[op->name] = op->gpuOnHostWhy;
  }
  for(const auto& kv : gpuPending())
    EXPECT_TRUE(lacking.count(kv.first)) << kv.first << " has a GPU kernel now: take it out of gpuPending()";
  for(const auto& name : lacking)
    EXPECT_TRUE(gpuPending().count(name)) << name << " has no GPU kernel; give it one (or list it with a reason)";
  for(const auto& kv : onHost) {
    SCOPED_TRACE(kv.first + " runs on the GPU on host copies: " + kv.second);
    // A random op draws on the host by design; any other op is waiting for
    // a GPU form, and its reason says so.
    const OpDef& op = Registry::instance().get(kv.first);
    EXPECT_TRUE(op.isStochastic || kv.second.find("no GPU form yet") != std::string::npos)
        << kv.first << ": gpuOnHost(\"" << kv.second << "\") should start \"no GPU form yet: ...\"";
  }
  // The list as it is now (it only shrinks as GPU forms come). 11 until
  // issue 16 added three CPU inference kernels (channel_affine,
  // lstm_sequence, fused_conv), whose GPU forms wait for a GPU to test them
  // on; 15 since issue 20's tree_ensemble (trees walked on the host); 17
  // since issue 21's qlinear_conv and matmul_integer (int8 kernels, CPU
  // only); 16 since matmul_integer got its GPU kernel (with
  // matmul_integer_to_float's).
  EXPECT_LE(onHost.size(), 16u) << "a new op runs its GPU kernel on host copies: give it a GPU kernel";
}

// ONYX_HARNESS_TRACE=1 prints each GPU case before it runs, so that a case
// which hangs a GPU (as qlinear_add's kernel once did) names itself.
static void traceGpuCase(const char* test, const OpCase& c) {
  static const bool on = std::getenv("ONYX_HARNESS_TRACE") != nullptr;
  if(on) {
    std::fprintf(stderr, "%s: %s/%s\n", test, c.op.c_str(), c.name.c_str());
    std::fflush(stderr);
  }
}

TEST(OpHarnessGpu, EveryCaseMatchesTheCpu) {
  if(gpuDeviceCount() == 0) GTEST_SKIP() << "GPU check not run: " << gpuUnavailable(0);
  for(size_t k = 0; k < cases().size(); ++k) {
    const OpCase& c = cases()[k];
    if(c.stochastic) continue;  // random draws differ between devices by design
    if(gpuPending().count(c.op)) continue;  // no GPU kernel yet (PendingListIsExact keeps the list true)
    SCOPED_TRACE(c.op + "/" + c.name);
    traceGpuCase("EveryCaseMatchesTheCpu", c);
    auto ins = makeInputs(c, 42 + k);
    try {
      Built cpu32 = build(c, ins, Type::float32, false), gpu32 = build(c, ins, Type::float32, false, gpu(0));
      cpu32.g->forward();
      gpu32.g->forward();
      compare(c, toRef(gpu32.y->val()), toRef(cpu32.y->val()), c.rtol, c.atol, "gpu float32 forward");
      if(!c.gradcheck) continue;
      Built cpu64 = build(c, ins, Type::float64, true), gpu64 = build(c, ins, Type::float64, true, gpu(0));
      for(Built* b : {&cpu64, &gpu64}) {
        auto w = b->g->constant(b->y->shape(), inits::fromValue(0.5), Type::float64);
        b->g->forward();
        b->g->backward(sum(b->y * w));
      }
      for(size_t i = 0; i < cpu64.xs.size(); ++i)
        if(cpu64.xs[i]->grad())
          compare(c, toRef(gpu64.xs[i]->grad()), toRef(cpu64.xs[i]->grad()), 1e-9, 1e-12, "gpu float64 gradient");
    } catch(const std::exception& e) {
      ADD_FAILURE() << c.op << "/" << c.name << " on gpu0: " << e.what();
    }
  }
}

// Ops whose GPU kernels do not take float16/bfloat16 yet, with the reason.
// On a GPU, HalfForwardMatchesTheCpu fails when a listed op passes (take it
// out). Empty: every GPU kernel loads halves in float, as the CPU's do.
const std::map<std::string, std::string>& gpuHalfPending() {
  static const std::map<std::string, std::string> pending = {};
  return pending;
}

// float16 forward on both devices, for every case whose CPU forward takes
// float16: the GPU computes halves in float (as the CPU), so the results
// agree to float16 rounding.
TEST(OpHarnessGpu, HalfForwardMatchesTheCpu) {
  if(gpuDeviceCount() == 0) GTEST_SKIP() << "GPU check not run: " << gpuUnavailable(0);
  for(size_t k = 0; k < cases().size(); ++k) {
    const OpCase& c = cases()[k];
    if(c.stochastic || gpuPending().count(c.op)) continue;
    SCOPED_TRACE(c.op + "/" + c.name);
    traceGpuCase("HalfForwardMatchesTheCpu", c);
    auto ins = makeInputs(c, 42 + k);
    Built cpu16;
    try {
      cpu16 = build(c, ins, Type::float16, false);
      cpu16.g->forward();
    } catch(const std::exception&) {
      continue;  // the op takes no float16 on the CPU either
    }
    try {
      Built gpu16 = build(c, ins, Type::float16, false, gpu(0));
      gpu16.g->forward();
      compare(c, toRef(gpu16.y->val()), toRef(cpu16.y->val()), std::max(c.rtol, 2e-2), std::max(c.atol, 2e-2),
              "gpu float16 forward");
      if(gpuHalfPending().count(c.op))
        ADD_FAILURE() << c.op << " runs in float16 on the GPU now: take it out of gpuHalfPending()";
    } catch(const std::exception& e) {
      if(!gpuHalfPending().count(c.op)) ADD_FAILURE() << c.op << "/" << c.name << " on gpu0 in float16: " << e.what();
    }
  }
}

// ---- ONNX and native round trips

// The case's graph with float/int/bool inputs as graph inputs (constant-only
// inputs stay constants), bound to the case's values.
struct BuiltIo {
  Ptr<ExpressionGraph> g;
  std::map<std::string, Tensor> feeds;
  Expr y;
};
BuiltIo buildWithInputs(const OpCase& c, const std::vector<Ref>& ins, Type ft) {
  BuiltIo b;
  b.g = New<ExpressionGraph>();
  b.g->setDevice({0, DeviceType::cpu});
  b.g->setDefaultElementType(ft);
  std::vector<Expr> xs;
  Rng rng(1);
  for(size_t i = 0; i < ins.size(); ++i) {
    const InputSpec& s = c.inputs[i];
    Type t = inputType(s, ft);
    Shape shape(ins[i].shape);
    if(!s.differentiable && !s.integer && !s.boolean) {  // constantInput
      xs.push_back(b.g->constant(shape, inits::fromVector(ins[i].v), t));
      continue;
    }
    std::string name = "x" + std::to_string(i);
    Tensor v = TensorBase::create(shape, t);
    inits::fromVector(ins[i].v)(*v, rng);
    Expr e = b.g->input(name, shape, t);
    e->bind(v);
    b.feeds[name] = v;
    xs.push_back(e);
  }
  b.y = c.build(xs);
  return b;
}

bool sameBits(const Tensor& a, const Tensor& b) {
  if(a->type() != b->type() || a->shape() != b->shape()) return false;
  if(a->type() == Type::string) return a->strings() == b->strings();
  return a->bytes() == 0 || std::memcmp(a->raw(), b->raw(), a->bytes()) == 0;
}

// The target opsets that exercise each ONNX rule of an op: both ends of
// every opset range (from 7, the oldest opset Onyx's importer is tested on,
// up to the newest it reads).
std::vector<int> exportOpsets(const OpDef& op) {
  std::set<int> s;
  for(const OnnxRule& r : op.onnxRules) {
    if(!r.domain.empty()) continue;
    if(!r.importable() && !r.exportFn) continue;
    int lo = std::max(r.since, 7), hi = std::min(r.until, onnxMaxOpset());
    if(lo > hi) continue;
    s.insert(lo);
    s.insert(hi);
  }
  return {s.begin(), s.end()};
}

class OpRoundTrip : public ::testing::TestWithParam<size_t> {};

// Every case's graph exports to ONNX for each opset range of its op, passes
// the ONNX checker (opsets libonnx knows), and imports back to a graph that
// computes the same bits; the native format reloads to the same bits too. An
// op with no ONNX form is refused with a message naming the node and op.
TEST_P(OpRoundTrip, OnnxAndNative) {
  const OpCase& c = cases()[GetParam()];
  const OpDef& op = Registry::instance().get(c.op);
  auto ins = makeInputs(c, 42 + GetParam());
  BuiltIo b = buildWithInputs(c, ins, Type::float32);
  b.g->setSeed(5);
  b.y->keepValue();
  b.g->forward();
  Tensor want = b.y->val();
  GraphSpec spec;
  spec.outputs = {{"y", b.y}};
  std::string tag = c.op + "/" + c.name;

  // Native: save, reload into a fresh graph, same bits.
  std::string npz = ::testing::TempDir() + "/onyx_rt_" + std::to_string(::getpid()) + "_" + std::to_string(GetParam()) + ".npz";
  saveNative(npz, spec);
  {
    auto g2 = New<ExpressionGraph>();
    g2->setSeed(5);
    GraphSpec s2 = loadNative(npz, *g2);
    for(auto& kv : b.feeds) g2->bindInput(kv.first, kv.second);
    ASSERT_EQ(s2.outputs.size(), 1u);
    Expr y2 = s2.outputs[0].second;
    y2->keepValue();
    g2->forward();
    if(!c.stochastic) {
      EXPECT_TRUE(sameBits(want, y2->val())) << tag << ": native round trip changed the output";
    }
    EXPECT_EQ(nativeGraphJson(s2), nativeGraphJson(spec)) << tag << ": native round trip changed the graph";
  }
  std::remove(npz.c_str());

  auto opsets = exportOpsets(op);
  if(opsets.empty()) {
    try {
      exportOnnx(spec, {});
      ADD_FAILURE() << tag << ": op without an ONNX form was exported";
    } catch(const Error& e) {
      std::string msg = e.what();
      EXPECT_NE(msg.find(c.op), std::string::npos) << tag << ": refusal does not name the op: " << msg;
      EXPECT_NE(msg.find("node '"), std::string::npos) << tag << ": refusal does not name the node: " << msg;
    }
    return;
  }
  for(int opset : opsets) {
    SCOPED_TRACE(tag + " at opset " + std::to_string(opset));
    ExportOptions eo;
    eo.opset = opset;
    ExportResult r;
    try {
      r = exportOnnx(spec, eo);
      checkOnnxModel(r.model, tag);
    } catch(const Error& e) {
      // Below the newest opset of a range, ONNX itself may lack what the case
      // uses: the ONNX op of that opset may not take the element type (the
      // checker says "unsupported type"), or another op of the case's graph
      // may have no ONNX form yet at that opset (ONNX's type lists grew over
      // the opsets), or the node's attributes may need a newer form
      // (requireOpset). Those refusals are correct; the newest opset must work.
      std::string msg = e.what();
      bool typeLimit = msg.find("has unsupported type") != std::string::npos;
      bool otherOpTooNew = msg.find("has no ONNX form at this opset") != std::string::npos &&
                           msg.find("(" + c.op + ", opset") == std::string::npos;
      bool needsNewer = msg.find(" or later (export with --opset ") != std::string::npos;  // requireOpset()
      if(opset != opsets.back() && (typeLimit || otherOpTooNew || needsNewer)) continue;
      // ONNX itself has no form for the case yet (BitShift takes signed
      // integers from opset 28, beyond the newest opset Onyx reads): a clear
      // refusal naming the node and op is the right answer.
      bool beyondNewest = false;
      size_t at = msg.find(" needs opset ");
      if(needsNewer && at != std::string::npos) beyondNewest = std::atoi(msg.c_str() + at + 13) > onnxMaxOpset();
      if(beyondNewest && msg.find("node '") != std::string::npos && msg.find("(" + c.op + ", opset") != std::string::npos)
        continue;
      ADD_FAILURE() << msg;
      continue;
    }
    std::string path = ::testing::TempDir() + "/onyx_rt_" + std::to_string(::getpid()) + "_" + std::to_string(GetParam()) + ".onnx";
    io::writeFileAtomic(path, r.model);
    try {
      auto model = Model::load(path);
      Session session(model);
      auto out = session.run(b.feeds);
      ASSERT_EQ(out.count("y"), 1u);
      if(c.stochastic)
        EXPECT_EQ(out["y"]->shape(), want->shape());
      else
        EXPECT_TRUE(sameBits(want, out["y"])) << "the re-imported model computes different bits";
    } catch(const Error& e) {
      ADD_FAILURE() << "re-import: " << e.what();
    }
    std::remove(path.c_str());
  }
}

std::string caseName(const ::testing::TestParamInfo<size_t>& info) {
  const OpCase& c = cases()[info.param];
  std::string s = c.op + "_" + c.name;
  for(auto& ch : s)
    if(!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s + "_" + std::to_string(info.param);
}

std::vector<size_t> allCaseIndices() {
  std::vector<size_t> v(cases().size());
  for(size_t i = 0; i < v.size(); ++i) v[i] = i;
  return v;
}

INSTANTIATE_TEST_SUITE_P(Registry, OpHarness, ::testing::ValuesIn(allCaseIndices()), caseName);
INSTANTIATE_TEST_SUITE_P(Registry, OpRoundTrip, ::testing::ValuesIn(allCaseIndices()), caseName);

// Every op in the registry is complete and has at least one case.
TEST(OpRegistry, EveryOpIsComplete) {
  std::set<std::string> covered;
  for(auto& c : cases()) {
    EXPECT_NE(Registry::instance().find(c.op), nullptr) << "case '" << c.name << "' names unknown op '" << c.op << "'";
    covered.insert(c.op);
  }
  auto all = Registry::instance().all();
  EXPECT_GT(all.size(), 10u);
  for(const OpDef* op : all) {
    SCOPED_TRACE(op->name);
    EXPECT_FALSE(op->docString.empty()) << op->name << ": no doc (one-line math)";
    EXPECT_TRUE(static_cast<bool>(op->inferFn)) << op->name << ": no shape/type inference";
    EXPECT_TRUE(static_cast<bool>(op->kernels[0])) << op->name << ": no CPU kernel";
    EXPECT_TRUE(op->differentiable() || !op->notDifferentiableWhy.empty())
        << op->name << ": no backward and no notDifferentiable(reason)";
    EXPECT_TRUE(!op->onnxRules.empty() || !op->noOnnxWhy.empty())
        << op->name << ": no ONNX rule and no noOnnx(reason)";
    EXPECT_TRUE(covered.count(op->name)) << op->name << ": no test case in tests/ops/cases_*.cpp";
    for(char ch : op->name)
      EXPECT_TRUE(std::islower(static_cast<unsigned char>(ch)) || std::isdigit(static_cast<unsigned char>(ch)) || ch == '_')
          << op->name << ": friendly names are lower_snake_case";
  }
}

// A differentiable op with float inputs must have a gradient-checked case.
TEST(OpRegistry, DifferentiableOpsAreGradientChecked) {
  std::set<std::string> checked;
  for(auto& c : cases())
    if(c.gradcheck) checked.insert(c.op);
  for(const OpDef* op : Registry::instance().all()) {
    if(!op->differentiable()) continue;
    EXPECT_TRUE(checked.count(op->name)) << op->name << ": differentiable but no case runs the gradient check";
  }
}

}  // namespace
}  // namespace test
}  // namespace onyx
