#include <onyx/graph/op_def.h>

#include <algorithm>

#include <onyx/graph/expression_graph.h>

namespace onyx {

Registry& Registry::instance() {
  static Registry r;
  return r;
}

OpDef& Registry::define(const std::string& name, const std::string& file) {
  ONYX_ASSERT(!ops_.count(name), "op '", name, "' is defined twice (second time in ", file, ")");
  auto& d = ops_[name];
  d.reset(new OpDef);
  d->name = name;
  auto slash = file.find_last_of('/');
  std::string base = slash == std::string::npos ? file : file.substr(slash + 1);
  d->family = base.substr(0, base.find('.'));
  return *d;
}

void Registry::setGpuKernel(const std::string& name, KernelFn f) {
  auto it = ops_.find(name);
  ONYX_ASSERT(it != ops_.end(), "a GPU kernel is registered for '", name, "', which is not a registry op");
  OpDef& op = *it->second;
  ONYX_ASSERT(!op.kernels[1], "op '", name, "' is given a second GPU kernel");
  ONYX_ASSERT(f, "op '", name, "' is given an empty GPU kernel");
  op.kernels[1] = std::move(f);
}

const OpDef* Registry::find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : it->second.get();
}

const OpDef& Registry::get(const std::string& name) const {
  const OpDef* d = find(name);
  ONYX_CHECK(d, "unknown op '", name, "' (not in the op registry; see docs/operators.md)");
  return *d;
}

std::vector<const OpDef*> Registry::all() const {
  std::vector<const OpDef*> v;
  for(auto& kv : ops_) v.push_back(kv.second.get());
  return v;
}

int OpDef::attrIndex(const char* n) const {
  for(size_t i = 0; i < attrSpecs.size(); ++i)
    if(attrSpecs[i].name == n) return static_cast<int>(i);
  return -1;
}

// ---- Attrs ----

const AttrValue& Attrs::operator[](const char* name) const {
  ONYX_ASSERT(op_, "attribute '", name, "' asked of a leaf node");
  int i = op_->attrIndex(name);
  ONYX_ASSERT(i >= 0, "op '", op_->name, "' has no attribute '", name, "'");
  return v_[i];
}
int64_t Attrs::i(const char* name) const { return std::get<int64_t>((*this)[name]); }
double Attrs::f(const char* name) const { return std::get<double>((*this)[name]); }
const std::string& Attrs::s(const char* name) const { return std::get<std::string>((*this)[name]); }
const IntList& Attrs::ints(const char* name) const { return std::get<IntList>((*this)[name]); }
const FloatList& Attrs::floats(const char* name) const { return std::get<FloatList>((*this)[name]); }

std::string attrToString(const AttrValue& v) {
  switch(v.index()) {
    case 0: return std::to_string(std::get<int64_t>(v));
    case 1: return str(std::get<double>(v));
    case 2: return "\"" + std::get<std::string>(v) + "\"";
    case 3: {
      std::string s = "[";
      for(auto x : std::get<IntList>(v)) s += (s.size() > 1 ? "," : "") + std::to_string(x);
      return s + "]";
    }
    default: {
      std::string s = "[";
      for(auto x : std::get<FloatList>(v)) s += (s.size() > 1 ? "," : "") + str(x);
      return s + "]";
    }
  }
}

size_t attrHash(const AttrValue& v) {
  size_t h = v.index() * 0x9e3779b97f4a7c15ull;
  auto mix = [&](size_t x) { h ^= x + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2); };
  switch(v.index()) {
    case 0: mix(std::hash<int64_t>()(std::get<int64_t>(v))); break;
    case 1: mix(std::hash<double>()(std::get<double>(v))); break;
    case 2: mix(std::hash<std::string>()(std::get<std::string>(v))); break;
    case 3: for(auto x : std::get<IntList>(v)) mix(std::hash<int64_t>()(x)); break;
    default: for(auto x : std::get<FloatList>(v)) mix(std::hash<double>()(x)); break;
  }
  return h;
}

// ---- InferCtx ----

const Shape& InferCtx::shapeOf(size_t i) const { return inputs[i]->shape(); }
Type InferCtx::typeOf(size_t i) const { return inputs[i]->value_type(); }

std::string InferCtx::describeInputs() const {
  std::string s;
  for(size_t i = 0; i < inputs.size(); ++i)
    s += (i ? ", " : "") + inputs[i]->shape().toString() + " " + typeName(inputs[i]->value_type());
  return s;
}

void InferCtx::failMsg(const std::string& msg) const {
  throw Error(str(op.name, ": ", msg, " (inputs: ", describeInputs(), ")"));
}

Type InferCtx::commonType() const {
  Type t = typeOf(0);
  for(size_t i = 1; i < n(); ++i)
    check(typeOf(i) == t, "inputs have different element types ", t, " and ", typeOf(i),
          "; cast one of them with cast()");
  return t;
}

int InferCtx::axis(int64_t axis, int rank, const char* what) const {
  try {
    return normalizeAxis(axis, rank, what);
  } catch(const Error& e) {
    failMsg(e.what());
  }
}

void InferCtx::requireFloat(size_t i) const {
  check(isFloat(typeOf(i)), "input ", i, " has element type ", typeOf(i),
        " but this op needs a floating-point type; cast it with cast(x, Type::float32)");
}

namespace infer {
void sameAsInput0(InferCtx& c) {
  c.shape = c.shapeOf(0);
  c.type = c.typeOf(0);
}
void broadcast(InferCtx& c) {
  c.type = c.commonType();
  SmallVec<Shape, 4> shapes;
  for(size_t i = 0; i < c.n(); ++i) shapes.push_back(c.shapeOf(i));
  try {
    c.shape = Shape::broadcast(shapes.data(), shapes.size());
  } catch(const Error& e) {
    c.fail(e.what());
  }
}
void broadcastToBool(InferCtx& c) {
  broadcast(c);
  c.type = Type::boolean;
}
}  // namespace infer

// ---- KernelCtx / GradCtx ----

// On the output's device: a GPU graph's host-copy kernels (.gpuOnHost) run
// the CPU kernel with a host output, and their scratch must be host memory
// too, not the graph's GPU workspace.
Tensor KernelCtx::scratch(const Shape& s, Type t) {
  if(out.getDeviceId() == graph.workspace()->device()) return TensorBase::create(s, t, graph.workspace());
  return TensorBase::create(s, t, out.getDeviceId());
}

bool KernelCtx::bf16() const { return graph.computePrecision() == ComputePrecision::bfloat16; }

Expr GradCtx::y() const { return Expr(node); }
Expr GradCtx::x(size_t i) const { return node->child(i); }
size_t GradCtx::n() const { return node->numChildren(); }

}  // namespace onyx
