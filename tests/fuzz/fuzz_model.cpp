// libFuzzer target (issue 19, docs/security.md): a serialized ModelProto is
// loaded, imported and run once on small inputs, as onnx-run would, under
// ASan + UBSan. Built with clang (-DONYX_FUZZ=ON, tools/dev.sh fuzz).
//
// What counts as a finding (abort, so libFuzzer keeps the input):
//  - a sanitizer report, a signal, a timeout or an allocation beyond
//    libFuzzer's -malloc_limit_mb (the run's own limit is kMemoryLimit);
//  - an onyx::InternalError (a broken invariant);
//  - an error that is not an onyx::Error (std::bad_alloc, std::out_of_range
//    ...: it names neither the file nor the node), or whose message is empty
//    or longer than one line.
// Anything else that fails is the model's fault: an onyx::Error of one line.
//
// Inputs: a graph input with an initializer of the same name is fed that
// initializer's value (tools/fuzz_corpus.py stores the node tests' inputs so);
// any other tensor input gets values made up from its declared type and shape
// (unknown dims: 2, at most kMaxInputElements); a sequence input is empty, an
// optional one absent; a model with a map input is only loaded.
//
// The mutator is structure-aware: most mutations parse the ModelProto and
// change one thing a model controls (a dim, an attribute, an initializer's
// type, dims or bytes, an op type, a node's wiring, an opset), in any
// subgraph too, then serialize it again; the rest are libFuzzer's own byte
// mutations. Byte flips alone reach little beyond the protobuf parser.
#include <onnx/defs/schema.h>
#include <onnx/onnx_pb.h>

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <onyx/core/error.h>
#include <onyx/runtime/model.h>
#include <onyx/runtime/session.h>

extern "C" size_t LLVMFuzzerMutate(uint8_t* data, size_t size, size_t maxSize);

namespace {

using namespace onyx;

constexpr size_t kMemoryLimit = size_t(16) << 20;  // one tensor, bytes
constexpr int64_t kMaxInputElements = 4096;

std::string gDataDir;  // an empty folder: external data finds nothing there

[[noreturn]] void finding(const char* what, const std::string& message) {
  std::fprintf(stderr, "\nFINDING: %s: %s\n", what, message.c_str());
  std::fflush(stderr);
  std::abort();
}

void checkError(const std::string& message) {
  if(message.empty()) finding("an empty error message", message);
  if(message.find('\n') != std::string::npos) finding("an error of more than one line", message);
}

// Values for a tensor input: small integers (valid as indices, axes and
// counts), floats around zero.
Tensor makeInput(const ValueInfo& vi) {
  std::vector<int64_t> dims;
  int64_t n = 1;
  for(int64_t d : vi.dims) {
    int64_t k = d < 0 ? 2 : d;
    if(k > kMaxInputElements) return nullptr;  // (a 0 elsewhere would empty it: not worth the run)
    dims.push_back(k);
    n *= k;  // both at most kMaxInputElements: no overflow
    if(n > kMaxInputElements) return nullptr;
  }
  Type t = vi.type == Type::undefined ? Type::float32 : vi.type;
  Tensor x = TensorBase::create(Shape(dims), t);
  if(t == Type::string) {
    for(size_t i = 0; i < x->strings().size(); ++i) x->strings()[i] = i % 2 ? "a" : "bb";
    return x;
  }
  for(int64_t i = 0; i < n; ++i) x->setFromDouble(i, isFloat(t) ? 0.5 * double(i % 7) - 1.5 : double(i % 3));
  return x;
}

void runOnce(const std::string& bytes) {
  std::shared_ptr<Model> model = Model::fromBytes(bytes, "fuzz.onnx", gDataDir);
  HostValues inputs;
  for(const ValueInfo& vi : model->inputs()) {
    auto init = model->initializers().find(vi.name);
    if(init != model->initializers().end()) {
      inputs[vi.name] = HostValue::of(init->second);
    } else if(vi.kind == "tensor") {
      Tensor x = makeInput(vi);
      if(!x) return;  // too large to be worth a run
      inputs[vi.name] = HostValue::of(x);
    } else if(vi.kind == "sequence") {
      inputs[vi.name] = HostValue::seq({}, vi.type);
    } else if(vi.kind == "optional") {
      inputs[vi.name] = HostValue::none(vi.type);
    } else {
      return;  // a map input: loaded only
    }
  }
  SessionOptions options;
  options.threads = 1;
  options.maxMemoryBytes = kMemoryLimit;
  options.maxCachedGraphs = 0;
  Session session(model, options);
  session.runValues(inputs);
}

// ---- the structure-aware mutator -------------------------------------------

using MutRng = std::minstd_rand;

size_t below(MutRng& rng, size_t n) { return n ? std::uniform_int_distribution<size_t>(0, n - 1)(rng) : 0; }
bool chance(MutRng& rng, int percent) { return int(below(rng, 100)) < percent; }

int64_t interestingInt(MutRng& rng) {
  static const int64_t values[] = {0, 1, 2, 3, 4, -1, -2, -3, 7, 8, 16, 255, 256, 65535,
                                   INT32_MAX, int64_t(INT32_MAX) + 1, INT32_MIN, int64_t(1) << 32,
                                   (int64_t(1) << 32) + 1, int64_t(1) << 53, int64_t(1) << 61,
                                   int64_t(1) << 62, INT64_MAX, INT64_MIN, 1000000};
  if(chance(rng, 60)) return int64_t(below(rng, 9)) - 2;
  return values[below(rng, sizeof(values) / sizeof(values[0]))];
}

float interestingFloat(MutRng& rng) {
  static const float values[] = {0.f, -0.f, 1.f, -1.f, 0.5f, 2.f, 1e-30f, 1e30f, 3.4e38f, -3.4e38f,
                                 1e-45f, std::numeric_limits<float>::infinity(),
                                 -std::numeric_limits<float>::infinity(),
                                 std::numeric_limits<float>::quiet_NaN()};
  return values[below(rng, sizeof(values) / sizeof(values[0]))];
}

const std::vector<std::string>& opTypes() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for(const auto& s : ::onnx::OpSchemaRegistry::get_all_schemas()) v.push_back(s.Name());
    return v;
  }();
  return names;
}

const char* const kAttrNames[] = {"axis", "axes", "perm", "keepdims", "group", "kernel_shape", "pads",
                                  "strides", "dilations", "auto_pad", "mode", "blocksize", "to", "alpha",
                                  "beta", "epsilon", "transA", "transB", "direction", "hidden_size",
                                  "num_outputs", "batch_dims", "reduction", "split", "size", "k",
                                  "largest", "sorted", "exclusive", "reverse", "ceil_mode", "count_include_pad",
                                  "output_padding", "output_shape", "coordinate_transformation_mode", "block_size",
                                  "saturate", "stash_type", "noop_with_empty_axes", "select_last_index"};
const char* const kStrings[] = {"", "NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID", "linear", "nearest", "cubic",
                                "constant", "reflect", "edge", "wrap", "DCR", "CRD", "forward", "reverse",
                                "bidirectional", "add", "mul", "max", "min", "none", "half_pixel",
                                "align_corners", "asymmetric", "Tanh", "Sigmoid", "Relu", "LOGISTIC",
                                "SOFTMAX", "PROBIT", "BRANCH_LEQ", "BRANCH_MEMBER", "x", "\xff\xfe"};

void allGraphs(::onnx::GraphProto* g, std::vector<::onnx::GraphProto*>& out) {
  out.push_back(g);
  for(auto& n : *g->mutable_node())
    for(auto& a : *n.mutable_attribute()) {
      if(a.has_g()) allGraphs(a.mutable_g(), out);
      for(auto& sg : *a.mutable_graphs()) allGraphs(&sg, out);
    }
}

// Names a node input may take in `g`: its inputs, initializers, node
// outputs, and "" (an absent optional input).
std::vector<std::string> valueNames(const ::onnx::GraphProto& g) {
  std::vector<std::string> v{""};
  for(const auto& i : g.input()) v.push_back(i.name());
  for(const auto& t : g.initializer()) v.push_back(t.name());
  for(const auto& n : g.node())
    for(const auto& o : n.output()) v.push_back(o);
  return v;
}

void mutateBytes(MutRng& rng, std::string& s, size_t maxExtra) {
  size_t size = s.size();
  s.resize(size + maxExtra + 1);
  size_t n = LLVMFuzzerMutate(reinterpret_cast<uint8_t*>(&s[0]), size, s.size());
  s.resize(n);
  (void)rng;
}

void mutateDims(MutRng& rng, ::onnx::TensorShapeProto* shape) {
  if(shape->dim_size() == 0 || chance(rng, 10)) {
    shape->add_dim()->set_dim_value(interestingInt(rng));
    return;
  }
  auto* d = shape->mutable_dim(int(below(rng, size_t(shape->dim_size()))));
  switch(below(rng, 4)) {
    case 0: d->set_dim_param("N"); break;
    case 1: shape->mutable_dim()->RemoveLast(); break;
    default: d->set_dim_value(interestingInt(rng));
  }
}

void mutateTensor(MutRng& rng, ::onnx::TensorProto* t) {
  switch(below(rng, 6)) {
    case 0:
      if(t->dims_size() && !chance(rng, 10)) t->set_dims(int(below(rng, size_t(t->dims_size()))), interestingInt(rng));
      else t->add_dims(interestingInt(rng));
      break;
    case 1:
      if(t->dims_size()) t->mutable_dims()->RemoveLast();
      break;
    case 2: t->set_data_type(int(below(rng, 26))); break;
    case 3:
      if(t->int64_data_size()) t->set_int64_data(int(below(rng, size_t(t->int64_data_size()))), interestingInt(rng));
      else if(t->int32_data_size()) t->set_int32_data(int(below(rng, size_t(t->int32_data_size()))), int32_t(interestingInt(rng)));
      else if(t->float_data_size()) t->set_float_data(int(below(rng, size_t(t->float_data_size()))), interestingFloat(rng));
      else if(t->raw_data().size() >= 8) {
        int64_t v = interestingInt(rng);
        size_t at = below(rng, t->raw_data().size() / 8) * 8;
        std::memcpy(&(*t->mutable_raw_data())[at], &v, 8);
      } else mutateBytes(rng, *t->mutable_raw_data(), 16);
      break;
    case 4: mutateBytes(rng, *t->mutable_raw_data(), 64); break;
    default:
      if(chance(rng, 50)) t->add_int64_data(interestingInt(rng));
      else t->add_float_data(interestingFloat(rng));
  }
}

void mutateAttribute(MutRng& rng, ::onnx::AttributeProto* a) {
  using A = ::onnx::AttributeProto;
  if(chance(rng, 5)) {
    a->set_type(A::AttributeType(below(rng, 15)));
    return;
  }
  switch(a->type()) {
    case A::INT: a->set_i(interestingInt(rng)); break;
    case A::FLOAT: a->set_f(interestingFloat(rng)); break;
    case A::STRING: a->set_s(kStrings[below(rng, sizeof(kStrings) / sizeof(kStrings[0]))]); break;
    case A::INTS:
      if(a->ints_size() && chance(rng, 70)) a->set_ints(int(below(rng, size_t(a->ints_size()))), interestingInt(rng));
      else if(a->ints_size() && chance(rng, 50)) a->mutable_ints()->RemoveLast();
      else a->add_ints(interestingInt(rng));
      break;
    case A::FLOATS:
      if(a->floats_size() && chance(rng, 70)) a->set_floats(int(below(rng, size_t(a->floats_size()))), interestingFloat(rng));
      else if(a->floats_size() && chance(rng, 50)) a->mutable_floats()->RemoveLast();
      else a->add_floats(interestingFloat(rng));
      break;
    case A::STRINGS:
      if(a->strings_size() && chance(rng, 50)) a->mutable_strings()->RemoveLast();
      else a->add_strings(kStrings[below(rng, sizeof(kStrings) / sizeof(kStrings[0]))]);
      break;
    case A::TENSOR: mutateTensor(rng, a->mutable_t()); break;
    default: a->set_i(interestingInt(rng)); a->set_type(A::INT);
  }
}

// One structural change to the model; false if it found nothing to change.
bool mutateModel(MutRng& rng, ::onnx::ModelProto& m) {
  std::vector<::onnx::GraphProto*> graphs;
  allGraphs(m.mutable_graph(), graphs);
  ::onnx::GraphProto& g = *graphs[below(rng, graphs.size())];
  const size_t kind = below(rng, 12);
  if(kind == 0) {  // a declared input or output: dims or type
    auto* list = chance(rng, 70) ? g.mutable_input() : g.mutable_output();
    if(list->empty()) return false;
    auto* vi = list->Mutable(int(below(rng, size_t(list->size()))));
    if(!vi->type().has_tensor_type()) return false;
    auto* tt = vi->mutable_type()->mutable_tensor_type();
    if(chance(rng, 20)) tt->set_elem_type(int(below(rng, 26)));
    else mutateDims(rng, tt->mutable_shape());
    return true;
  }
  if(kind <= 2) {  // an initializer
    if(g.initializer_size() == 0) return false;
    mutateTensor(rng, g.mutable_initializer(int(below(rng, size_t(g.initializer_size())))));
    return true;
  }
  if(m.opset_import_size() && kind == 3 && chance(rng, 30)) {
    m.mutable_opset_import(int(below(rng, size_t(m.opset_import_size()))))->set_version(int64_t(below(rng, 26)));
    return true;
  }
  if(g.node_size() == 0) return false;
  ::onnx::NodeProto* n = g.mutable_node(int(below(rng, size_t(g.node_size()))));
  switch(kind) {
    case 3:
    case 4:
    case 5:  // an attribute's value
      if(n->attribute_size() == 0) return false;
      mutateAttribute(rng, n->mutable_attribute(int(below(rng, size_t(n->attribute_size())))));
      return true;
    case 6: {  // a new attribute, or one dropped
      if(n->attribute_size() && chance(rng, 40)) {
        n->mutable_attribute()->DeleteSubrange(int(below(rng, size_t(n->attribute_size()))), 1);
        return true;
      }
      auto* a = n->add_attribute();
      a->set_name(kAttrNames[below(rng, sizeof(kAttrNames) / sizeof(kAttrNames[0]))]);
      if(chance(rng, 50)) {
        a->set_type(::onnx::AttributeProto::INT);
        a->set_i(interestingInt(rng));
      } else {
        a->set_type(::onnx::AttributeProto::INTS);
        for(size_t i = 0, k = below(rng, 5); i < k; ++i) a->add_ints(interestingInt(rng));
      }
      return true;
    }
    case 7:  // the op
      if(chance(rng, 10)) n->set_domain(chance(rng, 50) ? "ai.onnx.ml" : "com.microsoft");
      else n->set_op_type(opTypes()[below(rng, opTypes().size())]);
      return true;
    case 8: {  // an input rewired (or added, or dropped)
      std::vector<std::string> names = valueNames(g);
      if(n->input_size() == 0 || chance(rng, 15)) *n->add_input() = names[below(rng, names.size())];
      else if(chance(rng, 15)) n->mutable_input()->RemoveLast();
      else n->set_input(int(below(rng, size_t(n->input_size()))), names[below(rng, names.size())]);
      return true;
    }
    case 9: {  // an output renamed onto another value, or a node dropped
      if(chance(rng, 50)) {
        g.mutable_node()->DeleteSubrange(int(below(rng, size_t(g.node_size()))), 1);
        return true;
      }
      std::vector<std::string> names = valueNames(g);
      if(n->output_size() == 0) return false;
      n->set_output(int(below(rng, size_t(n->output_size()))), names[below(rng, names.size())]);
      return true;
    }
    case 10: {  // a node copied to the end (its outputs renamed)
      ::onnx::NodeProto copy = *n;
      for(auto& o : *copy.mutable_output()) o += "_c";
      *g.add_node() = copy;
      return true;
    }
    default: {  // a graph output pointed at another value
      std::vector<std::string> names = valueNames(g);
      if(g.output_size() == 0) return false;
      g.mutable_output(int(below(rng, size_t(g.output_size()))))->set_name(names[below(rng, names.size())]);
      return true;
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  char tmpl[] = "/tmp/onyx-fuzz-XXXXXX";
  const char* dir = mkdtemp(tmpl);
  if(!dir) {
    std::perror("mkdtemp");
    std::abort();
  }
  gDataDir = dir;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    runOnce(std::string(reinterpret_cast<const char*>(data), size));
  } catch(const InternalError& e) {
    finding("an internal error", e.what());
  } catch(const Error& e) {
    checkError(e.what());
  } catch(const std::exception& e) {
    finding("an error that is not an onyx::Error", e.what());
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t maxSize, unsigned int seed) {
  MutRng rng(seed ? seed : 1);
  ::onnx::ModelProto m;
  if(chance(rng, 15) || !m.ParseFromArray(data, int(size)) || !m.has_graph())
    return LLVMFuzzerMutate(data, size, maxSize);
  for(size_t tries = 0, changes = 1 + below(rng, 3); tries < 8 && changes; ++tries)
    if(mutateModel(rng, m)) --changes;
  std::string out;
  if(!m.SerializeToString(&out) || out.size() > maxSize) return LLVMFuzzerMutate(data, size, maxSize);
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

// Crossover: a node of the second model spliced into the first one's main
// graph, with the initializers it names.
extern "C" size_t LLVMFuzzerCustomCrossOver(const uint8_t* data1, size_t size1, const uint8_t* data2, size_t size2,
                                            uint8_t* out, size_t maxOutSize, unsigned int seed) {
  MutRng rng(seed ? seed : 1);
  ::onnx::ModelProto a, b;
  if(!a.ParseFromArray(data1, int(size1)) || !b.ParseFromArray(data2, int(size2)) || !a.has_graph() ||
     b.graph().node_size() == 0)
    return 0;
  const ::onnx::NodeProto& n = b.graph().node(int(below(rng, size_t(b.graph().node_size()))));
  auto* g = a.mutable_graph();
  for(const auto& t : b.graph().initializer())
    for(const auto& i : n.input())
      if(t.name() == i) *g->add_initializer() = t;
  ::onnx::NodeProto* added = g->add_node();
  *added = n;
  std::vector<std::string> names = valueNames(*g);
  for(auto& i : *added->mutable_input())
    if(chance(rng, 50)) i = names[below(rng, names.size())];
  if(added->output_size() && g->output_size() && chance(rng, 50))
    g->mutable_output(0)->set_name(added->output(0));
  std::string bytes;
  if(!a.SerializeToString(&bytes) || bytes.size() > maxOutSize) return 0;
  std::memcpy(out, bytes.data(), bytes.size());
  return bytes.size();
}
