// bench-ops: times one op at a time in an Onyx graph, as a model's Session
// runs it (inference graph, input bound, weights constant, forward() per
// run), and reports its median latency with GFLOP/s (conv, matmul) or GB/s
// (pooling, element-wise). The presets are shapes from the models of
// tools/bench_models.py. A measurement, not a test.
//
//   bench-ops --list
//   bench-ops --preset resnet50_conv3x3_256 --threads 2
//   bench-ops --preset all --json
//   bench-ops conv --c 256 --h 14 --w 14 --m 256 --k 3 --pad 1
//   bench-ops matmul --m 128 --k 768 --n 3072
//   bench-ops pool --kind max --c 64 --h 112 --w 112 --k 3 --stride 2 --pad 1
//   bench-ops eltwise --op sigmoid --elems 1000000
//
// Conv and matmul count 2 FLOP per multiply-add (as bench_models.py does for
// whole models); pooling and element-wise ops count the bytes of their float32
// inputs read and outputs written once each.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <iostream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include <onyx/backend/cpu/parallel.h>
#include <onyx/onyx.h>

using namespace onyx;

namespace {

// One op and its sizes; which fields matter depends on `op`.
struct Case {
  std::string name;  // preset name, or the op for a command-line case
  std::string op;    // conv, conv_transpose, matmul, pool, eltwise
  int64_t n = 1, c = 1, h = 1, w = 1, m = 1, k = 1, stride = 1, pad = 0, group = 1;
  int64_t mm = 1, nn = 1, kk = 1, batch = 1;  // matmul: [batch, mm, kk] x [batch, kk, nn]
  std::string kind = "max";                   // pool: max or avg
  std::string eltOp = "sigmoid";              // eltwise
  int64_t elems = 1 << 20;
};

struct Preset {
  const char* name;
  const char* from;  // the model and layer it comes from
  Case c;
};

Case convCase(int64_t n, int64_t c, int64_t hw, int64_t m, int64_t k, int64_t s, int64_t p, int64_t g,
              bool transpose = false) {
  Case x;
  x.op = transpose ? "conv_transpose" : "conv";
  x.n = n, x.c = c, x.h = hw, x.w = hw, x.m = m, x.k = k, x.stride = s, x.pad = p, x.group = g;
  return x;
}
Case matmulCase(int64_t batch, int64_t m, int64_t k, int64_t n) {
  Case x;
  x.op = "matmul";
  x.batch = batch, x.mm = m, x.kk = k, x.nn = n;
  return x;
}
Case poolCase(const std::string& kind, int64_t c, int64_t hw, int64_t k, int64_t s, int64_t p) {
  Case x = convCase(1, c, hw, c, k, s, p, 1);
  x.op = "pool";
  x.kind = kind;
  return x;
}
Case eltCase(const std::string& op, int64_t elems) {
  Case x;
  x.op = "eltwise";
  x.eltOp = op;
  x.elems = elems;
  return x;
}

const std::vector<Preset>& presets() {
  static const std::vector<Preset> list = {
      {"resnet50_conv3x3_256", "ResNet-50 layer3 3x3 conv, 256->256 at 14x14", convCase(1, 256, 14, 256, 3, 1, 1, 1)},
      {"resnet50_conv1x1_1024_256", "ResNet-50 layer3 1x1 conv, 1024->256 at 14x14",
       convCase(1, 1024, 14, 256, 1, 1, 0, 1)},
      {"resnet50_conv7x7s2_stem", "ResNet stem 7x7 stride-2 conv, 3->64 at 224x224", convCase(1, 3, 224, 64, 7, 2, 3, 1)},
      {"mobilenetv2_dw3x3_32", "MobileNetV2 depthwise 3x3 conv, 32 channels at 112x112",
       convCase(1, 32, 112, 32, 3, 1, 1, 32)},
      {"efficientnet_dw5x5_672", "EfficientNet-B0 depthwise 5x5 conv, 672 channels at 14x14",
       convCase(1, 672, 14, 672, 5, 1, 2, 672)},
      {"unet_convtranspose2x2_256_128", "U-Net 2x2 stride-2 ConvTranspose, 256->128 from 16x16",
       convCase(1, 256, 16, 128, 2, 2, 0, 1, true)},
      {"bert_matmul_128x768x768", "BERT-base Q/K/V/output projection, 128 tokens", matmulCase(1, 128, 768, 768)},
      {"bert_matmul_128x768x3072", "BERT-base FFN up-projection, 128 tokens", matmulCase(1, 128, 768, 3072)},
      {"bert_bmm_12x128x64x128", "BERT-base attention scores Q.K^T, 12 heads", matmulCase(12, 128, 64, 128)},
      {"resnet50_maxpool3x3s2", "ResNet stem 3x3 stride-2 max pool, 64 channels at 112x112",
       poolCase("max", 64, 112, 3, 2, 1)},
      {"sigmoid_1m", "Sigmoid over 2^20 floats (EfficientNet's SiLU and SE gates)", eltCase("sigmoid", 1 << 20)},
      {"exp_1m", "Exp over 2^20 floats (Softmax)", eltCase("exp", 1 << 20)},
      {"add_1m", "Add of two 2^20-float tensors (residual connections)", eltCase("add", 1 << 20)},
  };
  return list;
}

Tensor randomTensor(const Shape& shape, std::mt19937& rng) {
  Tensor t = TensorBase::create(shape, Type::float32);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  float* p = t->data<float>();
  for(int64_t i = 0; i < t->size(); ++i) p[i] = u(rng);
  return t;
}

std::string shapeText(const Shape& s) {
  std::ostringstream o;
  for(int d = 0; d < s.rank(); ++d) o << (d ? "x" : "") << s[d];
  return o.str();
}

// The op built on an inference graph, with what it costs per run.
struct Built {
  Expr y;
  std::string desc;
  double flop = 0, bytes = 0;  // one of them is set
};

Built build(ExpressionGraph& g, const Case& c, std::mt19937& rng) {
  auto input = [&](const std::string& name, const Shape& s) {
    Expr x = g.input(name, s);
    x->bind(randomTensor(s, rng));
    return x;
  };
  auto weight = [&](const Shape& s) { return g.constant(randomTensor(s, rng)); };
  Built b;
  std::ostringstream d;
  if(c.op == "conv" || c.op == "conv_transpose") {
    if(c.c % c.group != 0 || c.m % c.group != 0)
      throw Error(str(c.op, ": --c ", c.c, " and --m ", c.m, " must be multiples of --group ", c.group));
    bool t = c.op == "conv_transpose";
    Expr x = input("x", {c.n, c.c, c.h, c.w});
    Expr W = t ? weight({c.c, c.m / c.group, c.k, c.k}) : weight({c.m, c.c / c.group, c.k, c.k});
    Expr bias = weight({c.m});
    ConvOptions o;
    o.strides = {c.stride, c.stride};
    o.pads = {c.pad, c.pad, c.pad, c.pad};
    o.group = c.group;
    b.y = t ? conv_transpose(x, W, bias, o) : conv(x, W, bias, o);
    const Shape& ys = b.y->shape();
    // 2 FLOP per multiply-add: conv, one per output element and weight of its
    // group; the transpose, one per input element and weight of its group.
    b.flop = t ? 2.0 * static_cast<double>(c.n * c.c * c.h * c.w) * static_cast<double>(c.m / c.group * c.k * c.k)
               : 2.0 * static_cast<double>(ys.elements()) * static_cast<double>(c.c / c.group * c.k * c.k);
    d << "x " << shapeText(x->shape()) << ", W " << shapeText(W->shape()) << ", stride " << c.stride << ", pad "
      << c.pad << ", group " << c.group << " -> " << shapeText(ys);
  } else if(c.op == "matmul") {
    // A model's MatMul: activations times a constant weight; batched, both
    // operands are activations (attention).
    Expr a = c.batch > 1 ? input("a", {c.batch, c.mm, c.kk}) : input("a", {c.mm, c.kk});
    Expr w = c.batch > 1 ? input("b", {c.batch, c.kk, c.nn}) : weight({c.kk, c.nn});
    b.y = matmul(a, w);
    b.flop = 2.0 * static_cast<double>(c.batch) * static_cast<double>(c.mm * c.nn * c.kk);
    d << shapeText(a->shape()) << " x " << shapeText(w->shape()) << (c.batch > 1 ? "" : " (constant)") << " -> "
      << shapeText(b.y->shape());
  } else if(c.op == "pool") {
    Expr x = input("x", {c.n, c.c, c.h, c.w});
    PoolOptions o;
    o.strides = {c.stride, c.stride};
    o.pads = {c.pad, c.pad, c.pad, c.pad};
    if(c.kind == "max") b.y = max_pool(x, {c.k, c.k}, o);
    else if(c.kind == "avg") b.y = average_pool(x, {c.k, c.k}, o);
    else throw Error(str("pool: --kind must be max or avg, got '", c.kind, "'"));
    b.bytes = 4.0 * static_cast<double>(x->shape().elements() + b.y->shape().elements());
    d << c.kind << " " << c.k << "x" << c.k << " stride " << c.stride << " pad " << c.pad << ", x "
      << shapeText(x->shape()) << " -> " << shapeText(b.y->shape());
  } else if(c.op == "eltwise") {
    Expr x = input("x", {c.elems});
    int inputs = 1;
    if(c.eltOp == "sigmoid") b.y = sigmoid(x);
    else if(c.eltOp == "exp") b.y = exp(x);
    else if(c.eltOp == "tanh") b.y = tanh(x);
    else if(c.eltOp == "erf") b.y = erf(x);
    else if(c.eltOp == "relu") b.y = relu(x);
    else if(c.eltOp == "gelu") b.y = gelu(x);
    else if(c.eltOp == "silu") b.y = x * sigmoid(x);
    else if(c.eltOp == "add" || c.eltOp == "mul") {
      Expr x2 = input("x2", {c.elems});
      b.y = c.eltOp == "add" ? x + x2 : x * x2;
      inputs = 2;
    } else {
      throw Error(str("eltwise: unknown --op '", c.eltOp, "' (sigmoid, exp, tanh, erf, relu, gelu, silu, add, mul)"));
    }
    b.bytes = 4.0 * static_cast<double>(c.elems) * (inputs + 1);
    d << c.eltOp << " over " << c.elems << " floats";
  } else {
    throw Error(str("unknown op '", c.op, "'"));
  }
  b.desc = d.str();
  return b;
}

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  size_t rank = static_cast<size_t>(std::ceil(q * static_cast<double>(v.size())));
  return v[std::min(v.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Runs one case and prints one line (text or JSON).
void runCase(const Case& c, int iters, int warmup, bool json) {
  std::mt19937 rng(1);
  auto g = New<ExpressionGraph>();
  g->setInference(true);
  Built b = build(*g, c, rng);
  b.y->keepValue();
  g->forward();  // the first run, which a Session also does once per shape
  for(int i = 0; i < warmup; ++i) g->forward();
  std::vector<double> ms;
  for(int i = 0; i < iters; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    g->forward();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  double med = median(ms), p90 = quantile(ms, 0.9);
  bool compute = b.flop > 0;
  double rate = (compute ? b.flop : b.bytes) / (med * 1e-3) / 1e9;
  std::ostringstream o;
  o << std::fixed;
  if(json) {
    o << std::setprecision(6) << "{\"name\": \"" << c.name << "\", \"op\": \"" << c.op << "\", \"shape\": \"" << b.desc
      << "\", \"threads\": " << host::numThreads() << ", \"iters\": " << iters << ", \"median_ms\": " << med
      << ", \"p90_ms\": " << p90 << ", " << (compute ? "\"flop\": " : "\"bytes\": ") << std::setprecision(0)
      << (compute ? b.flop : b.bytes) << ", " << (compute ? "\"gflops\": " : "\"gbps\": ") << std::setprecision(3)
      << rate << "}";
  } else {
    o << c.name << ": " << b.desc << ": median " << std::setprecision(4) << med << " ms, p90 " << p90 << " ms, "
      << std::setprecision(1) << rate << (compute ? " GFLOP/s" : " GB/s");
  }
  std::cout << o.str() << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Times single ops in an Onyx graph (median latency, GFLOP/s or GB/s).\n\n"
               "Examples:\n"
               "  bench-ops --list\n"
               "  bench-ops --preset all --threads 2\n"
               "  bench-ops conv --c 256 --h 14 --w 14 --m 256 --k 3 --pad 1\n"
               "  bench-ops matmul --m 128 --k 768 --n 3072\n"
               "  bench-ops pool --kind max --c 64 --h 112 --w 112 --k 3 --stride 2 --pad 1\n"
               "  bench-ops eltwise --op sigmoid --elems 1000000\n"};
  app.fallthrough();
  app.require_subcommand(0, 1);
  int threads = 0, iters = 20, warmup = 3;
  bool json = false, list = false;
  std::vector<std::string> presetNames;
  // TakeLast: a later --iters/--warmup wins, so a script can shorten a given command line.
  app.add_option("--threads", threads, "CPU threads (0: OpenMP's default)")->capture_default_str();
  app.add_option("--iters", iters, "timed runs per op")
      ->capture_default_str()
      ->check(CLI::PositiveNumber)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--warmup", warmup, "untimed runs after the first")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--preset", presetNames, "a preset shape by name (repeatable), or 'all'; see --list");
  app.add_flag("--list", list, "print the presets and exit");
  app.add_flag("--json", json, "one JSON object per op instead of text");

  Case cmd;
  auto* convCmd = app.add_subcommand("conv", "2-D convolution with bias, NCHW, square kernel");
  bool transpose = false;
  for(auto* sc : {convCmd}) {
    sc->add_option("--n", cmd.n, "batch")->capture_default_str();
    sc->add_option("--c", cmd.c, "input channels")->capture_default_str();
    sc->add_option("--h", cmd.h, "input height")->capture_default_str();
    sc->add_option("--w", cmd.w, "input width")->capture_default_str();
    sc->add_option("--m", cmd.m, "output channels")->capture_default_str();
    sc->add_option("--k", cmd.k, "kernel size")->capture_default_str();
    sc->add_option("--stride", cmd.stride, "stride")->capture_default_str();
    sc->add_option("--pad", cmd.pad, "padding on every side")->capture_default_str();
    sc->add_option("--group", cmd.group, "groups (= --c = --m: depthwise)")->capture_default_str();
    sc->add_flag("--transpose", transpose, "ConvTranspose instead (W [C, M/group, k, k])");
  }
  auto* matmulCmd = app.add_subcommand("matmul", "[batch,] M x K times K x N (constant weight when not batched)");
  matmulCmd->add_option("--m", cmd.mm, "rows of the result")->capture_default_str();
  matmulCmd->add_option("--n", cmd.nn, "columns of the result")->capture_default_str();
  matmulCmd->add_option("--k", cmd.kk, "inner dimension")->capture_default_str();
  matmulCmd->add_option("--batch", cmd.batch, "batched matmul of two activations when > 1")->capture_default_str();
  auto* poolCmd = app.add_subcommand("pool", "2-D max or average pooling, NCHW, square window");
  poolCmd->add_option("--kind", cmd.kind, "max or avg")->capture_default_str();
  poolCmd->add_option("--n", cmd.n, "batch")->capture_default_str();
  poolCmd->add_option("--c", cmd.c, "channels")->capture_default_str();
  poolCmd->add_option("--h", cmd.h, "input height")->capture_default_str();
  poolCmd->add_option("--w", cmd.w, "input width")->capture_default_str();
  poolCmd->add_option("--k", cmd.k, "window size")->capture_default_str();
  poolCmd->add_option("--stride", cmd.stride, "stride")->capture_default_str();
  poolCmd->add_option("--pad", cmd.pad, "padding on every side")->capture_default_str();
  auto* eltCmd = app.add_subcommand("eltwise", "an element-wise op over a contiguous float32 vector");
  eltCmd->add_option("--op", cmd.eltOp, "sigmoid, exp, tanh, erf, relu, gelu, silu, add or mul")
      ->capture_default_str();
  eltCmd->add_option("--elems", cmd.elems, "elements")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    if(list) {
      for(const auto& p : presets()) std::cout << std::left << std::setw(32) << p.name << p.from << "\n";
      return 0;
    }
    std::vector<Case> cases;
    for(const auto& name : presetNames) {
      bool found = false;
      for(const auto& p : presets())
        if(name == "all" || name == p.name) {
          cases.push_back(p.c);
          cases.back().name = p.name;
          found = true;
        }
      if(!found) throw Error(str("--preset '", name, "': no such preset (see --list)"));
    }
    for(auto* sc : {convCmd, matmulCmd, poolCmd, eltCmd})
      if(sc->parsed()) {
        cmd.op = sc->get_name();
        if(sc == convCmd && transpose) cmd.op = "conv_transpose";
        cmd.name = cmd.op;
        cases.push_back(cmd);
      }
    if(cases.empty()) throw Error("nothing to run: give --preset NAME, --preset all, or an op (see --help)");
    for(const auto& c : cases)
      for(int64_t v : {c.n, c.c, c.h, c.w, c.m, c.k, c.stride, c.group, c.mm, c.nn, c.kk, c.batch, c.elems})
        if(v < 1 || c.pad < 0) throw Error(str(c.name, ": sizes, strides and groups must be positive, pads not negative"));
    if(threads > 0) host::setNumThreads(threads);
    for(const auto& c : cases) runCase(c, iters, warmup, json);
    return 0;
  } catch(const std::exception& e) {
    std::cerr << "bench-ops: " << e.what() << "\n";
    return 1;
  }
}
