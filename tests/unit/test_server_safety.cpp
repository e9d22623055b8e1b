// What a server needs from the runtime (issue 19): one Session run from many
// threads at once gives the single-threaded results; its graph cache stays
// within its bound; a run over its memory limit is an error, not an OOM kill;
// sizes a file controls are checked before anything is allocated.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <thread>

#include <onnx/onnx_pb.h>

#include <onyx/backend/cpu/dnnl_conv.h>
#include <onyx/core/allocator.h>
#include <onyx/core/checked.h>
#include <onyx/io/npz.h>
#include <onyx/onnx/tensor_proto.h>
#include <onyx/onyx.h>
#include <onyx/runtime/session.h>

namespace onyx {
namespace {

void addInput(::onnx::ValueInfoProto* v, const std::string& name, std::vector<std::string> dims) {
  v->set_name(name);
  auto* tt = v->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int>(Type::float32));
  for(const auto& d : dims) {
    auto* dim = tt->mutable_shape()->add_dim();
    if(d[0] >= '0' && d[0] <= '9') dim->set_dim_value(std::stoll(d));
    else dim->set_dim_param(d);
  }
}

void addFloatInit(::onnx::GraphProto* g, const std::string& name, std::vector<int64_t> dims, int salt) {
  auto* t = g->add_initializer();
  t->set_name(name);
  t->set_data_type(static_cast<int>(Type::float32));
  int64_t n = 1;
  for(auto d : dims) {
    t->add_dims(d);
    n *= d;
  }
  for(int64_t i = 0; i < n; ++i) t->add_float_data(static_cast<float>((i * 7 + salt) % 11) / 11.f - 0.45f);
}

void addNode(::onnx::GraphProto* g, const std::string& op, std::vector<std::string> in, std::string out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  n->set_name(out + "_node");
  for(auto& i : in) n->add_input(i);
  n->add_output(out);
}

// y = Softmax(Relu(x[N,16] W1 + b1) W2 + b2) with a symbolic batch N: a graph
// per batch size, several ops per graph.
std::shared_ptr<Model> mlpModel() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("mlp");
  addInput(g->add_input(), "x", {"N", "16"});
  addInput(g->add_output(), "y", {"N", "8"});
  addFloatInit(g, "w1", {16, 32}, 1);
  addFloatInit(g, "b1", {32}, 2);
  addFloatInit(g, "w2", {32, 8}, 3);
  addFloatInit(g, "b2", {8}, 4);
  addNode(g, "MatMul", {"x", "w1"}, "h0");
  addNode(g, "Add", {"h0", "b1"}, "h1");
  addNode(g, "Relu", {"h1"}, "h2");
  addNode(g, "MatMul", {"h2", "w2"}, "h3");
  addNode(g, "Add", {"h3", "b2"}, "h4");
  addNode(g, "Softmax", {"h4"}, "y");
  std::string bytes;
  m.SerializeToString(&bytes);
  return Model::fromBytes(bytes, "mlp.onnx");
}

Tensor batch(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n * 16));
  for(size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((static_cast<int>(i) * 13 + seed * 5) % 17) / 4.f - 2.f;
  return TensorBase::fromVector<float>({n, 16}, v);
}

// Runs `input(n, seed)` through one Session from kThreads threads at once
// (threads = 1 each, kRuns runs each, sizes and seeds mixed) and counts the
// results that differ from one serial Session's (mismatches) and the runs
// that threw (errors); want: the serial results, for checks of their own.
struct ConcurrentResult {
  int mismatches = 0, errors = 0;
  std::map<std::pair<int64_t, int>, std::vector<float>> want;
};

ConcurrentResult runConcurrently(const std::shared_ptr<Model>& model, Session& shared,
                                 const std::function<Tensor(int64_t, int)>& input, const std::vector<int64_t>& sizes,
                                 int kThreads, int kRuns, int kSeeds) {
  SessionOptions o;
  o.threads = 1;
  ConcurrentResult res;
  {
    Session ref(model, o);
    for(auto n : sizes)
      for(int s = 0; s < kSeeds; ++s) res.want[{n, s}] = ref.run({{"x", input(n, s)}}).at("y")->toVector<float>();
  }
  std::atomic<int> mismatches{0}, errors{0};
  std::vector<std::thread> pool;
  for(int t = 0; t < kThreads; ++t)
    pool.emplace_back([&, t] {
      for(int r = 0; r < kRuns; ++r) {
        int64_t n = sizes[static_cast<size_t>((t * 31 + r * 7) % static_cast<int>(sizes.size()))];
        int s = (t + r) % kSeeds;
        try {
          if(shared.run({{"x", input(n, s)}}).at("y")->toVector<float>() != res.want.at({n, s})) ++mismatches;
        } catch(const std::exception&) {
          ++errors;
        }
      }
    });
  for(auto& th : pool) th.join();
  res.mismatches = mismatches.load();
  res.errors = errors.load();
  return res;
}

SessionOptions oneThread() {
  SessionOptions o;
  o.threads = 1;
  return o;
}

TEST(ServerSession, ConcurrentRunsEqualSerialRuns) {
  auto model = mlpModel();
  const std::vector<int64_t> sizes = {1, 2, 3, 5, 8, 13};
  const int kThreads = 8;
  Session shared(model, oneThread());
  const ConcurrentResult r = runConcurrently(model, shared, batch, sizes, kThreads, 200, 4);
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.errors, 0);
  // At most one graph per signature per thread was ever built, and the
  // cache holds no more than were built.
  EXPECT_GE(shared.graphsBuilt(), sizes.size());
  EXPECT_LE(shared.graphsBuilt(), sizes.size() * kThreads);
  EXPECT_LE(shared.graphsCached(), shared.graphsBuilt());
}

// x[N, 4, 6, 6] -> QuantizeLinear (uint8) -> QLinearConv (int8 weights per
// channel, 7-bit, int32 bias, 3x3 pad 1) -> DequantizeLinear: the int8
// convolution through oneDNN, whose per-thread memory objects
// (dnnlQConvRun) must not mix between concurrent runs.
std::shared_ptr<Model> qconvModel() {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("qconv");
  addInput(g->add_input(), "x", {"N", "4", "6", "6"});
  addInput(g->add_output(), "y", {"N", "8", "6", "6"});
  auto init = [&](const std::string& name, Type t, std::vector<int64_t> dims, std::vector<double> v) {
    auto* p = g->add_initializer();
    p->set_name(name);
    p->set_data_type(static_cast<int>(t));
    for(auto d : dims) p->add_dims(d);
    for(double x : v) {
      if(t == Type::float32) p->add_float_data(static_cast<float>(x));
      else p->add_int32_data(static_cast<int32_t>(x));  // int8, uint8, int32
    }
  };
  std::vector<double> w(8 * 4 * 9), ws(8), wz(8, 0.0), b(8);
  for(size_t i = 0; i < w.size(); ++i) w[i] = double(int(i * 37 % 127) - 63);
  for(size_t m = 0; m < 8; ++m) {
    ws[m] = 0.01 + 0.002 * double(m);
    b[m] = double(int(m * 91 % 200) - 100);
  }
  init("xs", Type::float32, {}, {0.02});
  init("xz", Type::uint8, {}, {128});
  init("w", Type::int8, {8, 4, 3, 3}, w);
  init("ws", Type::float32, {8}, ws);
  init("wz", Type::int8, {8}, wz);
  init("ys", Type::float32, {}, {0.05});
  init("yz", Type::uint8, {}, {120});
  init("b", Type::int32, {8}, b);
  addNode(g, "QuantizeLinear", {"x", "xs", "xz"}, "xq");
  auto* conv = g->add_node();
  conv->set_op_type("QLinearConv");
  conv->set_name("qconv");
  for(const char* i : {"xq", "xs", "xz", "w", "ws", "wz", "ys", "yz", "b"}) conv->add_input(i);
  conv->add_output("yq");
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(::onnx::AttributeProto::INTS);
  for(int k = 0; k < 4; ++k) pads->add_ints(1);
  addNode(g, "DequantizeLinear", {"yq", "ys", "yz"}, "y");
  std::string bytes;
  m.SerializeToString(&bytes);
  return Model::fromBytes(bytes, "qconv.onnx");
}

Tensor image(int64_t n, int seed) {
  std::vector<float> v(static_cast<size_t>(n * 4 * 36));
  for(size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>((static_cast<int>(i) * 29 + seed * 11) % 23) / 5.f - 2.2f;
  return TensorBase::fromVector<float>({n, 4, 6, 6}, v);
}

TEST(ServerSession, ConcurrentQuantizedConvolutionsEqualSerialRuns) {
  auto model = qconvModel();
  const int kThreads = 8, kRuns = 100;
  Session shared(model, oneThread());
  const uint64_t dnnlBefore = host::dnnlConvRuns();
  const ConcurrentResult r = runConcurrently(model, shared, image, {1, 2, 3}, kThreads, kRuns, 3);
  // The outputs differ from seed to seed (else equality would prove little).
  EXPECT_NE(r.want.at({2, 0}), r.want.at({2, 1}));
  EXPECT_EQ(r.mismatches, 0);
  EXPECT_EQ(r.errors, 0);
  // With VNNI every run went through oneDNN's int8 convolution (7-bit
  // weights: exact there without VNNI as well).
  if(host::dnnlEnabled()) {
    EXPECT_GE(host::dnnlConvRuns() - dnnlBefore, uint64_t(kThreads * kRuns));
  }
}

TEST(ServerSession, CacheIsBoundedLeastRecentlyUsedFirst) {
  SessionOptions o;
  o.maxCachedGraphs = 2;
  Session s(mlpModel(), o);
  for(int64_t n = 1; n <= 6; ++n) s.run({{"x", batch(n, 0)}});
  EXPECT_EQ(s.graphsBuilt(), 6u);
  EXPECT_EQ(s.graphsCached(), 2u);
  s.run({{"x", batch(6, 1)}});  // most recent: still cached
  s.run({{"x", batch(5, 1)}});
  EXPECT_EQ(s.graphsBuilt(), 6u);
  s.run({{"x", batch(1, 1)}});  // dropped long ago: built again
  EXPECT_EQ(s.graphsBuilt(), 7u);
  EXPECT_EQ(s.graphsCached(), 2u);
  s.clearCache();
  EXPECT_EQ(s.graphsCached(), 0u);
  s.run({{"x", batch(6, 1)}});
  EXPECT_EQ(s.graphsBuilt(), 8u);

  SessionOptions none;
  none.maxCachedGraphs = 0;
  Session t(mlpModel(), none);
  t.run({{"x", batch(2, 0)}});
  t.run({{"x", batch(2, 0)}});
  EXPECT_EQ(t.graphsBuilt(), 2u);
  EXPECT_EQ(t.graphsCached(), 0u);
}

TEST(ServerSession, MemoryLimitIsAnErrorNotAKill) {
  SessionOptions o;
  o.maxMemoryBytes = 64 << 10;  // 64 KiB of values
  Session s(mlpModel(), o);
  // A small batch fits (a few KiB of activations)...
  auto ok = s.run({{"x", batch(4, 0)}});
  EXPECT_EQ(ok.at("y")->shape(), Shape({4, 8}));
  // ... a batch of 4096 needs 512 KiB for its first activation alone.
  try {
    s.run({{"x", batch(4096, 0)}});
    FAIL() << "no error";
  } catch(const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("memory limit"), std::string::npos) << msg;
    EXPECT_NE(msg.find("65536"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  // The session still works after the failed run.
  EXPECT_EQ(s.run({{"x", batch(4, 0)}}).at("y")->toVector<float>(), ok.at("y")->toVector<float>());
}

// Range over an input's value is computed while the graph is built (its
// size depends on the value): the limit covers that tensor too.
TEST(ServerSession, MemoryLimitCoversTensorsBuiltAtImport) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("range");
  auto* in = g->add_input();
  in->set_name("n");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int>(Type::float32));
  in->mutable_type()->mutable_tensor_type()->mutable_shape();
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int>(Type::float32));
  for(const char* name : {"zero", "one"}) {
    auto* t = g->add_initializer();
    t->set_name(name);
    t->set_data_type(static_cast<int>(Type::float32));
    t->add_float_data(name[0] == 'z' ? 0.f : 1.f);
  }
  addNode(g, "Range", {"zero", "n", "one"}, "y");
  std::string bytes;
  m.SerializeToString(&bytes);
  auto model = Model::fromBytes(bytes, "range.onnx");
  SessionOptions o;
  o.maxMemoryBytes = 64 << 10;
  Session s(model, o);
  auto small = s.run({{"n", TensorBase::fromVector<float>({}, {100.f})}});
  EXPECT_EQ(small.at("y")->shape(), Shape({100}));
  try {
    s.run({{"n", TensorBase::fromVector<float>({}, {1e6f})}});
    FAIL() << "no error";
  } catch(const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("memory limit: a tensor of 4000000 bytes is larger than the limit of 65536"), std::string::npos)
        << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
  // Without a limit the same run works (the limit was the session's only).
  Session free(model);
  EXPECT_EQ(free.run({{"n", TensorBase::fromVector<float>({}, {1e6f})}}).at("y")->shape(), Shape({1000000}));
}

// The importer reads integer inputs (shapes, axes, repeats) into int64
// vectors: from int8 values that is 8 times the tensor's bytes, held to the
// limit too (issue 19: the importers' host vectors).
TEST(ServerSession, MemoryLimitCoversTheImportersHostCopies) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("reshape");
  for(auto [name, type] : {std::pair<const char*, Type>{"x", Type::float32}, {"shape", Type::int8}}) {
    auto* in = g->add_input();
    in->set_name(name);
    in->mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int>(type));
  }
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int>(Type::float32));
  addNode(g, "Reshape", {"x", "shape"}, "y");
  std::string bytes;
  m.SerializeToString(&bytes);
  auto model = Model::fromBytes(bytes, "reshape.onnx");
  SessionOptions o;
  o.maxMemoryBytes = 16 << 10;
  Session s(model, o);
  Tensor x = TensorBase::fromVector<float>({2, 3}, {1, 2, 3, 4, 5, 6});
  auto ok = s.run({{"x", x}, {"shape", TensorBase::fromVector<int8_t>({2}, {3, 2})}});
  EXPECT_EQ(ok.at("y")->shape(), Shape({3, 2}));
  // 4000 int8 values fit in 16 KiB; their int64 copy (32000 bytes) does not.
  std::vector<int8_t> many(4000, 1);
  try {
    s.run({{"x", x}, {"shape", TensorBase::fromVector<int8_t>({4000}, many)}});
    FAIL() << "no error";
  } catch(const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("memory limit: the integer values of an input of 32000 bytes"), std::string::npos) << msg;
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
  }
}

// A model controls the names its errors quote: they stay one line (the
// libFuzzer target found a node input named "\x08\x04\x12\x0c\n...").
TEST(Errors, AreOneLineWhateverTheyQuote) {
  EXPECT_STREQ(Error("input 'a\nb\tc\x01' is missing").what(), "input 'a\\nb\\tc\\x01' is missing");
  EXPECT_STREQ(Error("plain").what(), "plain");
  EXPECT_STREQ(InternalError(std::string("x\0y", 3)).what(), "x\\x00y");
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("g");
  auto* out = g->add_output();
  out->set_name("y");
  out->mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int>(Type::float32));
  addNode(g, "Relu", {"line1\nline2"}, "y");
  std::string bytes;
  m.SerializeToString(&bytes);
  try {
    Session(Model::fromBytes(bytes, "names.onnx")).run({});
    FAIL() << "no error";
  } catch(const Error& e) {
    std::string msg = e.what();
    EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
    EXPECT_NE(msg.find("'line1\\nline2'"), std::string::npos) << msg;
  }
}

// Loop is unrolled while the graph is built: its iterations are bounded by
// SessionOptions::maxLoopIterations (issue 19: "bounded by an option").
TEST(ServerSession, LoopIterationsAreBoundedByAnOption) {
  ::onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(17);
  auto* g = m.mutable_graph();
  g->set_name("loop");
  auto declare = [](::onnx::ValueInfoProto* v, const char* name, Type t) {
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(static_cast<int>(t));
  };
  declare(g->add_input(), "m", Type::int64);
  declare(g->add_input(), "v", Type::float32);
  declare(g->add_output(), "y", Type::float32);
  auto* loop = g->add_node();
  loop->set_op_type("Loop");
  loop->add_input("m");
  loop->add_input("");
  loop->add_input("v");
  loop->add_output("y");
  auto* a = loop->add_attribute();
  a->set_name("body");
  a->set_type(::onnx::AttributeProto::GRAPH);
  auto* body = a->mutable_g();
  body->set_name("body");
  declare(body->add_input(), "i", Type::int64);
  declare(body->add_input(), "c", Type::boolean);
  declare(body->add_input(), "x", Type::float32);
  declare(body->add_output(), "c_out", Type::boolean);
  declare(body->add_output(), "x_out", Type::float32);
  addNode(body, "Identity", {"c"}, "c_out");
  addNode(body, "Relu", {"x"}, "x_out");
  std::string bytes;
  m.SerializeToString(&bytes);
  auto model = Model::fromBytes(bytes, "loop.onnx");
  auto feeds = [](int64_t trips) {
    return std::map<std::string, Tensor>{{"m", TensorBase::fromVector<int64_t>({}, {trips})},
                                         {"v", TensorBase::fromVector<float>({2}, {-1.f, 2.f})}};
  };
  SessionOptions o;
  o.maxLoopIterations = 10;
  Session s(model, o);
  EXPECT_EQ(s.run(feeds(10)).at("y")->toVector<float>(), std::vector<float>({0.f, 2.f}));
  try {
    s.run(feeds(11));
    FAIL() << "no error";
  } catch(const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("more than 10 iterations"), std::string::npos) << msg;
    EXPECT_NE(msg.find("Loop"), std::string::npos) << msg;
  }
  // The default (2^20) lets the same run through.
  EXPECT_EQ(Session(model).run(feeds(11)).at("y")->toVector<float>(), std::vector<float>({0.f, 2.f}));
  o.maxLoopIterations = 0;
  EXPECT_THROW(Session(model, o).run(feeds(1)), Error);
}

TEST(CheckedSizes, ShapesBeyondTheLimitAreErrors) {
  EXPECT_THROW(Shape({int64_t(1) << 30, int64_t(1) << 30, int64_t(1) << 30}), Error);
  EXPECT_THROW(Shape({int64_t(1) << 62, 4}), Error);  // wraps to 0 in 64 bits
  EXPECT_THROW(Shape({int64_t(1) << 57}), Error);
  EXPECT_NO_THROW(Shape({int64_t(1) << 40, 0}));   // empty: no elements at all
  EXPECT_THROW(Shape({13, int64_t(1) << 61, 0}), Error);  // empty, but strides would overflow
  EXPECT_EQ(Shape({kMaxTensorElements}).elements(), kMaxTensorElements);
  Shape s({4, 4});
  EXPECT_THROW(s.set(0, int64_t(1) << 60), Error);
  EXPECT_EQ(s, Shape({4, 4}));  // unchanged by the failed set
  EXPECT_THROW(typeBytes(Type::float64, size_t(1) << 61), Error);
  EXPECT_EQ(typeBytes(Type::int4, 3), 2u);
  EXPECT_THROW(mulChecked(int64_t(1) << 40, int64_t(1) << 40, "x"), Error);
  EXPECT_THROW(addChecked(INT64_MAX, 1, "x"), Error);
  EXPECT_THROW(absChecked(INT64_MIN, "x"), Error);
  EXPECT_EQ(absChecked(-5, "x"), 5);
}

TEST(CheckedSizes, TensorProtoDataIsCheckedAgainstItsShape) {
  auto errorOf = [](const ::onnx::TensorProto& t) -> std::string {
    try {
      tensorFromOnnx(t, ".", "initializer 't'");
    } catch(const Error& e) {
      return e.what();
    }
    return "";
  };
  ::onnx::TensorProto huge;  // 2^40 floats claimed, none given
  huge.set_data_type(static_cast<int>(Type::float32));
  huge.add_dims(int64_t(1) << 20);
  huge.add_dims(int64_t(1) << 20);
  std::string msg = errorOf(huge);
  EXPECT_NE(msg.find("initializer 't'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("float_data holds 0 values"), std::string::npos) << msg;
  huge.set_raw_data(std::string(16, '\0'));
  msg = errorOf(huge);
  EXPECT_NE(msg.find("raw_data has 16 bytes"), std::string::npos) << msg;
  ::onnx::TensorProto wrap;  // 2^62 * 8 elements: wraps to 0 in 64 bits
  wrap.set_data_type(static_cast<int>(Type::float32));
  wrap.add_dims(int64_t(1) << 62);
  wrap.add_dims(8);
  msg = errorOf(wrap);
  EXPECT_NE(msg.find("more than 2^56 elements"), std::string::npos) << msg;
  EXPECT_NE(msg.find("initializer 't'"), std::string::npos) << msg;
  ::onnx::TensorProto packed;  // int4: 5 elements need 3 bytes
  packed.set_data_type(static_cast<int>(Type::int4));
  packed.add_dims(5);
  packed.add_int32_data(1);
  msg = errorOf(packed);
  EXPECT_NE(msg.find("int32_data holds 1 bytes but the shape needs 3"), std::string::npos) << msg;
}

TEST(CheckedSizes, BoolBytesAreNormalised) {
  ::onnx::TensorProto t;
  t.set_data_type(static_cast<int>(Type::boolean));
  t.add_dims(4);
  t.set_raw_data(std::string("\x00\x07\x01\xff", 4));
  Tensor b = tensorFromOnnx(t, ".", "b");
  const auto* p = static_cast<const unsigned char*>(b->raw());
  EXPECT_EQ(std::vector<int>(p, p + 4), (std::vector<int>{0, 1, 1, 1}));
}

TEST(CheckedSizes, WorkspaceLimit) {
  Allocator a(DeviceId{});
  a.setLimit(1 << 20);
  void* p = a.alloc(1000);
  EXPECT_NE(p, nullptr);
  EXPECT_THROW(a.alloc(2 << 20), Error);
  EXPECT_THROW(a.alloc(size_t(1) << 63), Error);
  a.free(p, 1000);
  EXPECT_LE(a.capacity(), size_t(1) << 20);
}

// The sites issue 19 found, each with the input that broke it.
TEST(CheckedSizes, FileControlledAttributesAreErrorsNotTraps) {
  auto g = New<ExpressionGraph>();
  Expr x = g->constant({1, 4, 2, 2}, inits::ones());
  // blocksize^2 wrapped to 0 and divided by it (SIGFPE).
  EXPECT_THROW(depth_to_space(x, int64_t(1) << 32), Error);
  EXPECT_THROW(space_to_depth(x, int64_t(1) << 62), Error);
  // A stride of 2^61 wrapped ConvTranspose's output size.
  Expr w = g->constant({4, 1, 1, 1}, inits::ones());
  ConvOptions big;
  big.strides = {int64_t(1) << 61, 1};
  EXPECT_THROW(conv_transpose(x, w, nullptr, big), Error);
  EXPECT_THROW(conv(x, g->constant({1, 4, 1, 1}, inits::ones()), nullptr, big), Error);
  ConvOptions pads;
  pads.pads = {INT64_MAX, 0, INT64_MAX, 0};
  EXPECT_THROW(conv(x, g->constant({1, 4, 1, 1}, inits::ones()), nullptr, pads), Error);
  // LRN of any size is a few nodes (size 1e6 unrolled into 2M nodes).
  size_t before = g->size();
  Expr y = lrn(x, 1000000);
  EXPECT_LT(g->size() - before, 12u);
  g->forward();
  std::vector<float> v;
  y->val()->get(v);
  // Every channel's window holds all 4 channels: 1 / (1 + 1e-4 / 1e6 * 4)^0.75.
  for(float f : v) EXPECT_NEAR(f, 1.0 / std::pow(1.0 + 4e-10, 0.75), 1e-6);
}

TEST(CheckedSizes, IntegerNegationWraps) {
  auto g = New<ExpressionGraph>();
  Expr m = g->constant(TensorBase::fromVector<int64_t>({3}, {INT64_MIN, -5, 7}));
  Expr n = neg(m), a = abs(m);
  g->forward();
  EXPECT_EQ(n->val()->toVector<int64_t>(), (std::vector<int64_t>{INT64_MIN, 5, -7}));
  EXPECT_EQ(a->val()->toVector<int64_t>(), (std::vector<int64_t>{INT64_MIN, 5, 7}));
}

TEST(CheckedSizes, NpzMembersCannotClaimMoreThanDeflateMakes) {
  char tmpl[] = "/tmp/onyx_npz_XXXXXX";
  std::string dir = mkdtemp(tmpl);
  std::string path = dir + "/a.npz";
  io::saveZip(path, {{"a.npy", std::string(4000, 'x')}});  // stored: csize == usize
  std::string z;
  {
    std::ifstream f(path, std::ios::binary);
    z.assign(std::istreambuf_iterator<char>(f), {});
  }
  // The central directory's uncompressed size (offset 24 of its entry)
  // claims 3.5 GB; the local header and the data stay as they were.
  size_t cd = z.rfind(std::string("PK\x01\x02", 4));
  ASSERT_NE(cd, std::string::npos);
  uint32_t lie = 0xd0000000u;
  std::memcpy(&z[cd + 24], &lie, 4);
  // The archive written as `bytes`, read back: the error's message.
  auto loadError = [&](const std::string& bytes) -> std::string {
    {
      std::ofstream f(path, std::ios::binary | std::ios::trunc);
      f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    }
    try {
      io::loadZip(path);
    } catch(const Error& e) {
      return e.what();
    }
    return "no error";
  };
  std::string msg = loadError(z);
  EXPECT_NE(msg.find("a.npz: member 'a.npy' is stored with 4000 bytes but claims 3489660928"), std::string::npos) << msg;
  // The same claim for a deflated member: more than deflate's 1032:1 ratio.
  uint16_t deflate = 8;
  std::memcpy(&z[cd + 10], &deflate, 2);
  msg = loadError(z);
  EXPECT_NE(msg.find("claims 3489660928 bytes from 4000 compressed bytes, more than deflate can produce"),
            std::string::npos)
      << msg;
  std::remove(path.c_str());
  std::remove(dir.c_str());
}

}  // namespace
}  // namespace onyx
