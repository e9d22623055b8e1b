// The Python module onyx._onyx (nanobind): the runtime (Model, Session), the
// Trainer and the graph API over libonyx. The package's pure-Python layer
// (python/onyx/__init__.py) puts onnxruntime's and the seed's names on top;
// docs/python.md is the user's page.
//
// Arrays cross the boundary without copies where the layout allows:
// - in: a C-contiguous, aligned CPU array (numpy, or anything with
//   __dlpack__, e.g. a PyTorch tensor) becomes a Tensor over the array's own
//   memory, which the Tensor keeps alive (TensorBase::wrap);
// - out: a Tensor becomes a numpy array over the Tensor's memory, which the
//   array keeps alive through a capsule.
// The GIL is released while a session runs or a trainer steps; runs on one
// session from several Python threads run in parallel (onyx::Session is
// thread-safe: each run owns a graph of its own).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <optional>

#include <onyx/backend/cpu/parallel.h>
#include <onyx/onyx.h>

namespace nb = nanobind;
using namespace nb::literals;
using namespace onyx;

namespace {

// ---- element types ----

nb::dlpack::dtype dtypeOf(Type t) {
  using C = nb::dlpack::dtype_code;
  auto d = [](C c, int bits) {
    nb::dlpack::dtype r;
    r.code = static_cast<uint8_t>(c);
    r.bits = static_cast<uint8_t>(bits);
    r.lanes = 1;
    return r;
  };
  switch(t) {
    case Type::float32: return d(C::Float, 32);
    case Type::float64: return d(C::Float, 64);
    case Type::float16: return d(C::Float, 16);
    case Type::bfloat16: return d(C::Bfloat, 16);
    case Type::int8: return d(C::Int, 8);
    case Type::int16: return d(C::Int, 16);
    case Type::int32: return d(C::Int, 32);
    case Type::int64: return d(C::Int, 64);
    case Type::uint8: return d(C::UInt, 8);
    case Type::uint16: return d(C::UInt, 16);
    case Type::uint32: return d(C::UInt, 32);
    case Type::uint64: return d(C::UInt, 64);
    case Type::boolean: return d(C::Bool, 8);
    case Type::complex64: return d(C::Complex, 64);
    case Type::complex128: return d(C::Complex, 128);
    default: throw Error(str("a tensor of type ", typeName(t), " has no numpy form (it is a storage-only type)"));
  }
}

Type typeOfDtype(const nb::dlpack::dtype& d, const std::string& what) {
  using C = nb::dlpack::dtype_code;
  auto code = static_cast<C>(d.code);
  if(d.lanes == 1) {
    switch(code) {
      case C::Float:
        if(d.bits == 32) return Type::float32;
        if(d.bits == 64) return Type::float64;
        if(d.bits == 16) return Type::float16;
        break;
      case C::Bfloat:
        if(d.bits == 16) return Type::bfloat16;
        break;
      case C::Int:
        if(d.bits == 8) return Type::int8;
        if(d.bits == 16) return Type::int16;
        if(d.bits == 32) return Type::int32;
        if(d.bits == 64) return Type::int64;
        break;
      case C::UInt:
        if(d.bits == 8) return Type::uint8;
        if(d.bits == 16) return Type::uint16;
        if(d.bits == 32) return Type::uint32;
        if(d.bits == 64) return Type::uint64;
        break;
      case C::Bool:
        if(d.bits == 8) return Type::boolean;
        break;
      case C::Complex:
        if(d.bits == 64) return Type::complex64;
        if(d.bits == 128) return Type::complex128;
        break;
      default: break;
    }
  }
  throw Error(str(what, ": arrays of DLPack type code ", int(d.code), " with ", int(d.bits), " bits and ", int(d.lanes),
                  " lanes have no Onyx element type"));
}

// ---- arrays in and out ----

using AnyArray = nb::ndarray<nb::ro>;

// Holds a Python object for a Tensor; drops it with the GIL held (the last
// reference may go from a thread that released it, e.g. inside a run).
std::shared_ptr<const void> keepAlive(nb::object o) {
  auto* held = new nb::object(std::move(o));
  return std::shared_ptr<const void>(held, [](const void* p) {
    nb::gil_scoped_acquire gil;
    delete static_cast<const nb::object*>(p);
  });
}

// A Tensor over the array's memory (no copy). The Python layer makes numpy
// arrays C-contiguous and aligned first; anything else here is the caller's
// error, named.
Tensor tensorOf(const AnyArray& a, const std::string& what) {
  if(a.device_type() != nb::device::cpu::value)
    throw Error(str(what, ": the array lives on DLPack device type ", a.device_type(),
                    "; Onyx takes CPU arrays here (copy it to the CPU first)"));
  Type t = typeOfDtype(a.dtype(), what);
  std::vector<int64_t> dims(a.ndim());
  int64_t expect = 1;
  bool contiguous = true;
  for(size_t i = a.ndim(); i-- > 0;) {
    dims[i] = static_cast<int64_t>(a.shape(i));
    if(a.shape(i) != 1 && a.stride(i) != expect) contiguous = false;
    expect *= static_cast<int64_t>(a.shape(i));
  }
  if(!contiguous) throw Error(str(what, ": the array is not C-contiguous (make it so first, e.g. np.ascontiguousarray)"));
  size_t align = std::max<size_t>(1, a.itemsize() > 8 ? 8 : a.itemsize());
  if(reinterpret_cast<uintptr_t>(a.data()) % align != 0)
    throw Error(str(what, ": the array's memory is not aligned for its element type"));
  nb::object owner = nb::cast(a);
  return TensorBase::wrap(const_cast<void*>(a.data()), Shape(dims), t, keepAlive(std::move(owner)));
}

// A numpy array over the tensor's memory (no copy): the array keeps the
// tensor alive. String tensors become object arrays of str (a copy).
nb::object toNumpy(const Tensor& t0) {
  Tensor t = t0->onHost() ? t0 : t0->hostCopy();
  std::vector<size_t> shape;
  for(int64_t d : t->shape().dims()) shape.push_back(static_cast<size_t>(d));
  if(t->type() == Type::string) {
    nb::list items;
    for(const auto& s : t->strings()) items.append(nb::bytes(s.data(), s.size()).attr("decode")("utf-8", "surrogateescape"));
    nb::object np = nb::module_::import_("numpy");
    nb::tuple dims = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(shape.size())));
    for(size_t i = 0; i < shape.size(); ++i) PyTuple_SET_ITEM(dims.ptr(), i, PyLong_FromSize_t(shape[i]));
    return np.attr("array")(items, "dtype"_a = "object").attr("reshape")(dims);
  }
  auto* held = new Tensor(t);
  nb::capsule owner(held, [](void* p) noexcept { delete static_cast<Tensor*>(p); });
  nb::ndarray<nb::numpy> arr(t->raw(), shape.size(), shape.data(), owner, nullptr, dtypeOf(t->type()));
  return arr.cast();
}

Tensor stringTensor(const std::vector<std::string>& items, const std::vector<int64_t>& dims) {
  Tensor t = TensorBase::create(Shape(dims), Type::string);
  ONYX_CHECK(t->size() == static_cast<int64_t>(items.size()), "string array of shape ", Shape(dims), " given ",
             items.size(), " items");
  t->strings() = items;
  return t;
}

// A value for a session input: an array, a string array (passed as
// ("__strings__", items, shape) by the Python layer), a list (a sequence) or
// None (an absent optional).
HostValue hostValueOf(nb::handle v, const std::string& what, const ValueInfo* info = nullptr) {
  if(v.is_none()) return HostValue::none();
  if(nb::isinstance<nb::dict>(v)) {
    // A map: int or str keys, numbers as values (of the declared types).
    nb::dict d = nb::borrow<nb::dict>(v);
    const int64_t K = static_cast<int64_t>(d.size());
    bool strKeys = K > 0 && nb::isinstance<nb::str>(d.keys()[0]);
    if(info && info->keyType != Type::undefined) strKeys = info->keyType == Type::string;
    Type vt = info && info->type != Type::undefined ? info->type : Type::float32;
    Tensor keys = TensorBase::create(Shape{K}, strKeys ? Type::string : Type::int64);
    Tensor values = TensorBase::create(Shape{K}, vt);
    int64_t i = 0;
    for(auto kv : d) {
      if(strKeys) {
        if(!nb::isinstance<nb::str>(kv.first)) throw Error(str(what, ": map keys must all be str"));
        keys->strings()[static_cast<size_t>(i)] = nb::cast<std::string>(kv.first);
      } else {
        if(!nb::isinstance<nb::int_>(kv.first)) throw Error(str(what, ": map keys must all be int"));
        keys->setFromDouble(i, static_cast<double>(nb::cast<int64_t>(kv.first)));
      }
      if(vt == Type::string) throw Error(str(what, ": maps with string values are not supported"));
      values->setFromDouble(i, nb::cast<double>(kv.second));
      ++i;
    }
    return HostValue::map(keys, values);
  }
  if(nb::isinstance<nb::tuple>(v)) {
    nb::tuple tp = nb::borrow<nb::tuple>(v);
    if(tp.size() == 3 && nb::isinstance<nb::str>(tp[0]) && nb::cast<std::string>(tp[0]) == "__strings__")
      return HostValue::of(stringTensor(nb::cast<std::vector<std::string>>(tp[1]), nb::cast<std::vector<int64_t>>(tp[2])));
  }
  if(nb::isinstance<nb::list>(v)) {
    std::vector<Tensor> items;
    size_t i = 0;
    for(nb::handle e : v) {
      HostValue hv = hostValueOf(e, str(what, "[", i++, "]"));
      if(hv.kind != OnnxValue::Kind::Tensor) throw Error(str(what, ": a sequence holds tensors only"));
      items.push_back(hv.tensor);
    }
    return HostValue::seq(std::move(items));
  }
  AnyArray a;
  if(!nb::try_cast(v, a, false))
    throw Error(str(what, ": expected an array (numpy, or an object with __dlpack__), a list of arrays or None; got ",
                    nb::cast<std::string>(nb::str(v.type()))));
  return HostValue::of(tensorOf(a, what));
}

// A map's key k as a Python object (int or str).
nb::object mapKey(const Tensor& keys, int64_t k) {
  if(keys->type() == Type::string) return nb::str(keys->strings()[static_cast<size_t>(k)].c_str());
  return nb::int_(keys->get<int64_t>(k));
}

nb::object mapValue(const Tensor& values, int64_t i) {
  if(isFloat(values->type())) return nb::float_(values->getAsDouble(i));
  return nb::int_(values->get<int64_t>(i));
}

nb::object pyValue(const HostValue& v) {
  switch(v.kind) {
    case OnnxValue::Kind::Map: {
      nb::dict d;
      for(int64_t k = 0; k < v.tensor->size(); ++k) d[mapKey(v.tensor, k)] = mapValue(v.mapValues, k);
      return d;
    }
    case OnnxValue::Kind::MapSequence: {
      nb::list l;
      const int64_t K = v.tensor->size(), n = K ? v.mapValues->size() / K : 0;
      for(int64_t m = 0; m < n; ++m) {
        nb::dict d;
        for(int64_t k = 0; k < K; ++k) d[mapKey(v.tensor, k)] = mapValue(v.mapValues, m * K + k);
        l.append(d);
      }
      return l;
    }
    case OnnxValue::Kind::Tensor: return toNumpy(v.tensor);
    case OnnxValue::Kind::Sequence: {
      nb::list l;
      for(const auto& t : v.sequence) l.append(toNumpy(t));
      return l;
    }
    default: return nb::none();
  }
}

DeviceId deviceOf(const std::string& name) {
  if(name == "cpu" || name == "cpu0") return cpu();
  if(name.rfind("gpu", 0) == 0 || name.rfind("cuda", 0) == 0) {
    std::string n = name.substr(name.rfind("gpu", 0) == 0 ? 3 : 4);
    if(!n.empty() && n[0] == ':') n = n.substr(1);
    size_t idx = 0;
    try {
      idx = n.empty() ? 0 : static_cast<size_t>(std::stoul(n));
    } catch(const std::exception&) {
      throw Error(str("device '", name, "': expected cpu, gpu0, gpu1, ... (or cuda:N)"));
    }
    return {idx, DeviceType::gpu};
  }
  throw Error(str("device '", name, "': expected cpu, gpu0, gpu1, ... (or cuda:N)"));
}

OptLevel optLevelOf(const std::string& s) {
  if(s == "none" || s == "disable" || s == "disabled") return OptLevel::none;
  if(s == "basic") return OptLevel::basic;
  if(s == "all" || s == "extended") return OptLevel::all;
  throw Error(str("optimization '", s, "': expected none, basic or all"));
}

nb::dict valueInfo(const ValueInfo& v) {
  nb::dict d;
  d["name"] = v.name;
  d["kind"] = v.kind;
  d["type"] = v.type == Type::undefined ? std::string("undefined") : std::string(typeName(v.type));
  d["key_type"] = v.keyType == Type::undefined ? std::string("") : std::string(typeName(v.keyType));
  if(v.hasShape) {
    nb::list shape;
    for(size_t i = 0; i < v.dims.size(); ++i) {
      if(v.dims[i] >= 0) shape.append(v.dims[i]);
      else if(!v.dimNames[i].empty()) shape.append(v.dimNames[i]);
      else shape.append(nb::none());
    }
    d["shape"] = shape;
  } else {
    d["shape"] = nb::none();
  }
  d["describe"] = v.describe();
  return d;
}

// ---- the runtime ----

struct PySession {
  std::shared_ptr<Model> model;
  std::unique_ptr<Session> session;

  nb::dict run(const std::optional<std::vector<std::string>>& outputs, nb::dict feeds) {
    HostValues in;
    for(auto kv : feeds) {
      std::string name = nb::cast<std::string>(nb::str(kv.first));
      const ValueInfo* info = nullptr;
      for(const auto& i : model->inputs())
        if(i.name == name) info = &i;
      in[name] = hostValueOf(kv.second, str(model->path(), ": input '", name, "'"), info);
    }
    std::vector<std::string> names = outputs ? *outputs : std::vector<std::string>{};
    HostValues out;
    {
      nb::gil_scoped_release nogil;
      out = session->runValues(in, names);
    }
    nb::dict r;
    if(names.empty())
      for(const auto& o : model->outputs()) r[o.name.c_str()] = pyValue(out.at(o.name));
    else
      for(const auto& n : names) r[n.c_str()] = pyValue(out.at(n));
    return r;
  }
};

// ---- the graph API ----

struct PyGraph;

// An expression: the node handle and the graph it belongs to (kept alive).
struct PyExpr {
  Expr e;
  Ptr<ExpressionGraph> g;
};

Shape shapeOf(const std::vector<int64_t>& dims) { return Shape(dims); }

Type typeOfName(const std::optional<std::string>& name) {
  if(!name || name->empty()) return Type::undefined;
  std::string n = *name;
  if(n == "float") n = "float32";
  if(n == "double") n = "float64";
  if(n == "bool") n = "boolean";
  return typeFromName(n);
}

PyExpr asExpr(nb::handle h, const Ptr<ExpressionGraph>& g, Type like) {
  if(nb::isinstance<PyExpr>(h)) {
    PyExpr x = nb::cast<PyExpr>(h);
    if(x.g != g) throw Error("an expression of another graph: every input of an op must come from the same graph");
    return x;
  }
  if(nb::isinstance<nb::float_>(h) || nb::isinstance<nb::int_>(h) || nb::isinstance<nb::bool_>(h))
    return {g->scalar(nb::cast<double>(h), like == Type::undefined ? g->getDefaultElementType() : like), g};
  AnyArray a;
  if(nb::try_cast(h, a, false)) return {g->constant(tensorOf(a, "a constant")->hostCopy()), g};
  throw Error(str("expected an onyx.Expr, a number or an array; got ", nb::cast<std::string>(nb::str(h.type()))));
}

AttrValue attrOf(const std::string& name, nb::handle v) {
  if(nb::isinstance<nb::bool_>(v)) return int64_t(nb::cast<bool>(v));
  if(nb::isinstance<nb::int_>(v)) return nb::cast<int64_t>(v);
  if(nb::isinstance<nb::float_>(v)) return nb::cast<double>(v);
  if(nb::isinstance<nb::str>(v)) return nb::cast<std::string>(v);
  if(nb::isinstance<nb::list>(v) || nb::isinstance<nb::tuple>(v)) {
    bool allInt = true;
    for(nb::handle e : v) allInt &= nb::isinstance<nb::int_>(e) || nb::isinstance<nb::bool_>(e);
    if(allInt) {
      IntList l;
      for(nb::handle e : v) l.push_back(nb::cast<int64_t>(e));
      return l;
    }
    FloatList l;
    for(nb::handle e : v) l.push_back(nb::cast<double>(e));
    return l;
  }
  throw Error(str("attribute '", name, "': expected an int, float, str or a list of numbers; got ",
                  nb::cast<std::string>(nb::str(v.type()))));
}

PyExpr makeOp(const std::string& opName, nb::args inputs, nb::kwargs attrs) {
  const OpDef& op = Registry::instance().get(opName);
  Ptr<ExpressionGraph> g;
  Type like = Type::undefined;
  for(nb::handle h : inputs)
    if(nb::isinstance<PyExpr>(h)) {
      PyExpr x = nb::cast<PyExpr>(h);
      if(!g) g = x.g;
      if(like == Type::undefined) like = x.e->value_type();
    }
  if(!g) throw Error(str(opName, ": at least one input must be an onyx.Expr (it names the graph)"));
  std::vector<Expr> ins;
  for(nb::handle h : inputs) ins.push_back(asExpr(h, g, like).e);
  std::vector<std::pair<std::string, AttrValue>> as;
  for(auto kv : attrs) {
    std::string n = nb::cast<std::string>(kv.first);
    if(!n.empty() && n.back() == '_') n.pop_back();  // lambda_ -> lambda
    if(op.attrIndex(n.c_str()) < 0) {
      std::string known;
      for(const auto& s : op.attrSpecs) known += (known.empty() ? "" : ", ") + s.name;
      throw Error(str(opName, ": no attribute '", n, "' (it has: ", known.empty() ? "none" : known, ")"));
    }
    as.emplace_back(n, attrOf(n, kv.second));
  }
  return {g->make(op, ins, as), g};
}

PyExpr binary(nb::handle a, nb::handle b, const char* op) {
  Ptr<ExpressionGraph> g = nb::isinstance<PyExpr>(a) ? nb::cast<PyExpr>(a).g : nb::cast<PyExpr>(b).g;
  Type like = nb::isinstance<PyExpr>(a) ? nb::cast<PyExpr>(a).e->value_type() : nb::cast<PyExpr>(b).e->value_type();
  Expr x = asExpr(a, g, like).e, y = asExpr(b, g, like).e;
  std::string o = op;
  Expr r = o == "+" ? x + y : o == "-" ? x - y : o == "*" ? x * y : x / y;
  return {r, g};
}

NodeInitializer initOf(nb::handle h) {
  if(nb::isinstance<NodeInitializer>(h)) return nb::cast<NodeInitializer>(h);
  AnyArray a;
  if(nb::try_cast(h, a, false)) return inits::fromTensor(tensorOf(a, "an initial value")->hostCopy());
  if(nb::isinstance<nb::float_>(h) || nb::isinstance<nb::int_>(h)) return inits::fromValue(nb::cast<double>(h));
  throw Error(str("expected an initializer (onyx.inits.*), an array or a number; got ",
                  nb::cast<std::string>(nb::str(h.type()))));
}

Ptr<OptimizerBase> makeOptimizer(const std::string& name, const OptimizerOptions& o) {
  Ptr<OptimizerBase> opt = optimizerByName(name, o);
  if(!opt) throw Error(str("optimizer '", name, "': expected sgd, adagrad, adam or adamw"));
  return opt;
}

// ---- the Trainer ----

Batch batchOf(nb::dict d, const std::string& what) {
  Batch b;
  for(auto kv : d) {
    std::string name = nb::cast<std::string>(nb::str(kv.first));
    AnyArray a;
    if(!nb::try_cast(kv.second, a, false))
      throw Error(str(what, ": array '", name, "' is not an array (numpy, or an object with __dlpack__)"));
    b[name] = tensorOf(a, str(what, ": array '", name, "'"));
  }
  return b;
}

nb::dict tensorsDict(const std::vector<std::pair<std::string, Tensor>>& ts) {
  nb::dict d;
  for(const auto& kv : ts) d[kv.first.c_str()] = toNumpy(kv.second);
  return d;
}

nb::dict evalDict(const EvalResult& r) {
  nb::dict d;
  d["loss"] = r.loss;
  d["accuracy"] = r.accuracy;
  d["samples"] = r.samples;
  return d;
}

}  // namespace

NB_MODULE(_onyx, m) {
  m.doc() = "Onyx's C++ core (libonyx); use the onyx package, not this module.";

  nb::exception<Error>(m, "OnyxError", PyExc_RuntimeError);
  nb::exception<InternalError>(m, "OnyxInternalError", PyExc_AssertionError);

  // ---- runtime ----
  nb::class_<Model>(m, "Model")
      .def_static("load", &Model::load, "path"_a, nb::call_guard<nb::gil_scoped_release>())
      .def_static(
          "from_bytes",
          [](nb::bytes b, const std::string& name) {
            std::string s(b.c_str(), b.size());
            nb::gil_scoped_release nogil;
            return Model::fromBytes(s, name);
          },
          "data"_a, "name"_a = "<model bytes>")
      .def_prop_ro("path", &Model::path)
      .def_prop_ro("inputs",
                   [](const Model& mo) {
                     nb::list l;
                     for(const auto& v : mo.inputs()) l.append(valueInfo(v));
                     return l;
                   })
      .def_prop_ro("outputs",
                   [](const Model& mo) {
                     nb::list l;
                     for(const auto& v : mo.outputs()) l.append(valueInfo(v));
                     return l;
                   })
      .def("opset", &Model::opset, "domain"_a = "")
      .def_prop_ro("warnings", &Model::warnings)
      .def("meta", [](const Model& mo) {
        ModelMeta me = mo.meta();
        nb::dict d;
        d["producer_name"] = me.producerName;
        d["producer_version"] = me.producerVersion;
        d["domain"] = me.domain;
        d["description"] = me.docString;
        d["version"] = me.version;
        d["graph_name"] = me.graphName;
        d["graph_description"] = me.graphDescription;
        d["custom_metadata_map"] = me.customMetadata;
        return d;
      });

  nb::class_<PySession>(m, "Session")
      .def(
          "__init__",
          [](PySession* self, std::shared_ptr<Model> model, int threads, const std::string& device,
             const std::string& optimization, std::vector<std::string> disabledPasses, bool profile,
             size_t maxCachedGraphs, size_t maxMemoryBytes, int64_t maxLoopIterations) {
            SessionOptions o;
            o.maxCachedGraphs = maxCachedGraphs;
            o.maxMemoryBytes = maxMemoryBytes;
            o.maxLoopIterations = maxLoopIterations;
            o.threads = threads;
            o.device = deviceOf(device);
            o.optimization = optLevelOf(optimization);
            o.disabledPasses = std::move(disabledPasses);
            o.profile = profile;
            new(self) PySession();
            self->model = model;
            self->session = std::make_unique<Session>(model, o);
          },
          "model"_a, "threads"_a = 0, "device"_a = "cpu", "optimization"_a = "all",
          "disabled_passes"_a = std::vector<std::string>{}, "profile"_a = false, "max_cached_graphs"_a = 64,
          "max_memory_bytes"_a = 0, "max_loop_iterations"_a = int64_t(1) << 20)
      .def("run", &PySession::run, "outputs"_a.none(), "feeds"_a)
      .def_prop_ro("graphs_built", [](PySession& s) { return s.session->graphsBuilt(); })
      .def_prop_ro("graphs_cached", [](PySession& s) { return s.session->graphsCached(); })
      .def("clear_cache", [](PySession& s) { s.session->clearCache(); })
      .def("profile_report",
           [](PySession& s) {
             const auto& p = s.session->profiler();
             if(!p) throw Error("profile_report: the session was made without profile=True");
             return p->report();
           })
      .def("_input_address", [](PySession& s, const std::string& name) -> uintptr_t {
        auto g = s.session->lastGraph();
        if(!g) throw Error("no run yet");
        Expr e = g->get(name);
        if(!e) throw Error(str("no input node '", name, "' in the last graph"));
        return reinterpret_cast<uintptr_t>(e->val()->raw());
      });

  // ---- graph API ----
  nb::class_<NodeInitializer>(m, "Init");
  nb::module_ in = m.def_submodule("inits", "Node initializers (graph/node_initializers.h).");
  in.def("zeros", [] { return inits::zeros(); });
  in.def("ones", [] { return inits::ones(); });
  in.def("from_value", [](double v) { return inits::fromValue(v); }, "value"_a);
  in.def("from_vector", [](const std::vector<double>& v) { return inits::fromVector(v); }, "values"_a);
  in.def("uniform", [](float lo, float hi) { return inits::uniform(lo, hi); }, "low"_a = 0.f, "high"_a = 1.f);
  in.def("normal", [](float mean, float sd) { return inits::normal(mean, sd); }, "mean"_a = 0.f, "stddev"_a = 1.f);
  in.def("glorot_uniform", [] { return inits::glorotUniform(); });
  in.def("glorot_normal", [] { return inits::glorotNormal(); });

  nb::class_<PyExpr>(m, "Expr")
      .def_prop_ro("shape",
                   [](const PyExpr& x) {
                     const auto& s = x.e->shape().dims();
                     std::vector<int64_t> d(s.begin(), s.end());
                     return d;
                   })
      .def_prop_ro("dtype", [](const PyExpr& x) { return std::string(typeName(x.e->value_type())); })
      .def_prop_ro("id", [](const PyExpr& x) { return x.e->getId(); })
      .def_prop_ro("op", [](const PyExpr& x) { return x.e->type(); })
      .def_prop_rw(
          "name", [](const PyExpr& x) { return x.e->name(); },
          [](PyExpr& x, const std::string& n) { x.e->set_name(n); })
      .def_prop_ro("trainable", [](const PyExpr& x) { return x.e->trainable(); })
      .def("value", [](const PyExpr& x) {
        Tensor& v = x.e->val();
        if(!v) throw Error(str("node ", x.e->getId(), " (", x.e->type(), ") has no value: run graph.forward() first"));
        return toNumpy(v->hostCopy());
      })
      .def("grad", [](const PyExpr& x) {
        Tensor& g = x.e->grad();
        if(!g) throw Error(str("node ", x.e->getId(), " (", x.e->type(),
                               ") has no gradient: run graph.backward() first (gradients are kept for params and for "
                               "nodes marked with retain_grad())"));
        return toNumpy(g->hostCopy());
      })
      .def("retain_grad", [](PyExpr& x) { x.e->retainGrad(); })
      .def("debug", [](PyExpr& x, const std::string& msg) { x.e->debug(msg); }, "message"_a)
      .def("mark_checkpoint", [](PyExpr& x) { x.e->markCheckpoint(); })
      .def("__add__", [](nb::handle a, nb::handle b) { return binary(a, b, "+"); }, nb::is_operator())
      .def("__radd__", [](nb::handle a, nb::handle b) { return binary(b, a, "+"); }, nb::is_operator())
      .def("__sub__", [](nb::handle a, nb::handle b) { return binary(a, b, "-"); }, nb::is_operator())
      .def("__rsub__", [](nb::handle a, nb::handle b) { return binary(b, a, "-"); }, nb::is_operator())
      .def("__mul__", [](nb::handle a, nb::handle b) { return binary(a, b, "*"); }, nb::is_operator())
      .def("__rmul__", [](nb::handle a, nb::handle b) { return binary(b, a, "*"); }, nb::is_operator())
      .def("__truediv__", [](nb::handle a, nb::handle b) { return binary(a, b, "/"); }, nb::is_operator())
      .def("__rtruediv__", [](nb::handle a, nb::handle b) { return binary(b, a, "/"); }, nb::is_operator())
      .def("__neg__", [](const PyExpr& x) { return PyExpr{-x.e, x.g}; })
      .def("__repr__", [](const PyExpr& x) {
        return str("onyx.Expr(id=", x.e->getId(), ", op=", x.e->type(), ", shape=", x.e->shape(), ", dtype=",
                   typeName(x.e->value_type()), ")");
      });

  m.def("make", &makeOp, "Builds registry op `op` on the inputs (positional) with the attributes (keywords).");
  m.def("op_specs", [] {
    nb::list l;
    for(const OpDef* op : Registry::instance().all()) {
      nb::dict d;
      d["name"] = op->name;
      d["doc"] = op->docString;
      d["family"] = op->family;
      d["min_inputs"] = op->minInputs;
      d["max_inputs"] = op->maxInputs;
      d["differentiable"] = op->differentiable();
      nb::list attrs;
      for(const auto& s : op->attrSpecs) {
        nb::object def;
        std::visit(
            [&](const auto& v) {
              using V = std::decay_t<decltype(v)>;
              if constexpr(std::is_same_v<V, IntList> || std::is_same_v<V, FloatList>) {
                nb::list li;
                for(auto e : v) li.append(e);
                def = li;
              } else {
                def = nb::cast(v);
              }
            },
            s.defaultValue);
        attrs.append(nb::make_tuple(s.name, def));
      }
      d["attrs"] = attrs;
      nb::list onnx;
      for(const auto& r : op->onnxRules)
        if(!r.opType.empty()) onnx.append(r.domain.empty() ? r.opType : r.domain + "." + r.opType);
      d["onnx"] = onnx;
      l.append(d);
    }
    return l;
  });

  nb::class_<ExpressionGraph>(m, "_GraphCore");
  m.def(
      "new_graph",
      [](const std::string& device, size_t workspaceMB, std::optional<std::string> dtype, bool inference) {
        auto g = New<ExpressionGraph>();
        g->setDevice(deviceOf(device));
        g->reserveWorkspaceMB(workspaceMB);
        if(dtype) g->setDefaultElementType(typeOfName(dtype));
        g->setInference(inference);
        return g;
      },
      "device"_a = "cpu", "workspace_mb"_a = 128, "dtype"_a.none() = nb::none(), "inference"_a = false);
  m.def("graph_constant", [](const Ptr<ExpressionGraph>& g, const std::vector<int64_t>& shape, nb::handle init,
                             std::optional<std::string> dtype) {
    return PyExpr{g->constant(shapeOf(shape), initOf(init), typeOfName(dtype)), g};
  });
  m.def("graph_constant_array", [](const Ptr<ExpressionGraph>& g, const AnyArray& a) {
    return PyExpr{g->constant(tensorOf(a, "constant")->hostCopy()), g};
  });
  m.def("graph_indices", [](const Ptr<ExpressionGraph>& g, const std::vector<int64_t>& v) {
    return PyExpr{g->indices(v), g};
  });
  m.def("graph_param", [](const Ptr<ExpressionGraph>& g, const std::string& name, const std::vector<int64_t>& shape,
                          nb::handle init, std::optional<std::string> dtype, bool trainable) {
    return PyExpr{g->param(name, shapeOf(shape), initOf(init), typeOfName(dtype), trainable), g};
  });
  m.def("graph_input", [](const Ptr<ExpressionGraph>& g, const std::string& name, const std::vector<int64_t>& shape,
                          std::optional<std::string> dtype) {
    return PyExpr{g->input(name, shapeOf(shape), typeOfName(dtype)), g};
  });
  m.def("graph_bind", [](const Ptr<ExpressionGraph>& g, const std::string& name, const AnyArray& a) {
    g->bindInput(name, tensorOf(a, str("input '", name, "'")));
  });
  m.def("graph_get", [](const Ptr<ExpressionGraph>& g, const std::string& name) -> std::optional<PyExpr> {
    Expr e = g->get(name);
    if(!e) return std::nullopt;
    return PyExpr{e, g};
  });
  m.def("graph_forward", [](const Ptr<ExpressionGraph>& g) {
    nb::gil_scoped_release nogil;
    g->forward();
  });
  m.def("graph_backward", [](const Ptr<ExpressionGraph>& g, std::optional<PyExpr> root) {
    Expr r = root ? root->e : Expr();
    nb::gil_scoped_release nogil;
    g->backward(r);
  });
  m.def("graph_clear", [](const Ptr<ExpressionGraph>& g) { g->clear(); });
  m.def("graph_size", [](const Ptr<ExpressionGraph>& g) { return g->size(); });
  m.def("graph_graphviz", [](const Ptr<ExpressionGraph>& g) { return g->graphviz(); });
  m.def("graph_save", [](const Ptr<ExpressionGraph>& g, const std::string& path) { g->save(path); });
  m.def("graph_load", [](const Ptr<ExpressionGraph>& g, const std::string& path) { g->load(path); });
  m.def("graph_set_seed", [](const Ptr<ExpressionGraph>& g, uint64_t s) { g->setSeed(s); });
  m.def("graph_set_inference", [](const Ptr<ExpressionGraph>& g, bool on) { g->setInference(on); });
  m.def("graph_set_checkpointing", [](const Ptr<ExpressionGraph>& g, bool on) { g->setCheckpointing(on); });
  m.def("graph_params", [](const Ptr<ExpressionGraph>& g) {
    std::vector<std::pair<std::string, PyExpr>> r;
    for(const Expr& p : *g->params()) r.emplace_back(p->name(), PyExpr{p, g});
    return r;
  });
  m.def("graph_export_onnx",
        [](const Ptr<ExpressionGraph>& g, const std::string& path, const std::vector<std::pair<std::string, PyExpr>>& outputs,
           const std::map<std::string, std::vector<std::string>>& dimNames, int opset) {
          (void)g;
          GraphSpec spec;
          for(const auto& kv : outputs) spec.outputs.emplace_back(kv.first, kv.second.e);
          spec.dimNames = dimNames;
          ExportOptions eo;
          eo.opset = opset;
          ExportResult r = exportOnnx(spec, eo);
          checkOnnxModel(r.model, path);
          writeOnnxModel(path, r);
          return r.opset;
        },
        "graph"_a, "path"_a, "outputs"_a, "dim_names"_a, "opset"_a = 0);

  nb::class_<OptimizerBase>(m, "Optimizer")
      .def("update",
           [](OptimizerBase& o, const Ptr<ExpressionGraph>& g) {
             nb::gil_scoped_release nogil;
             return o.update(*g);
           })
      .def_prop_rw("lr", &OptimizerBase::learningRate, &OptimizerBase::setLearningRate)
      .def_prop_ro("steps", &OptimizerBase::steps);
  m.def(
      "make_optimizer",
      [](const std::string& name, double lr, double momentum, double weightDecay, double clipNorm, double beta1,
         double beta2, double eps) {
        OptimizerOptions o;
        o.lr = lr;
        o.momentum = momentum;
        o.weightDecay = weightDecay;
        o.clipNorm = clipNorm;
        o.beta1 = beta1;
        o.beta2 = beta2;
        o.eps = eps;
        return makeOptimizer(name, o);
      },
      "name"_a, "lr"_a, "momentum"_a = 0.0, "weight_decay"_a = 0.0, "clip_norm"_a = 0.0, "beta1"_a = 0.9,
      "beta2"_a = 0.999, "eps"_a = 1e-8);

  // ---- training ----
  nb::class_<Trainer>(m, "Trainer")
      .def(
          "__init__",
          [](Trainer* self, const std::string& model, nb::dict kw) {
            TrainerOptions o;
            for(auto kv : kw) {
              std::string k = nb::cast<std::string>(kv.first);
              nb::handle v = kv.second;
              if(k == "inputs") o.inputs = nb::cast<std::map<std::string, std::string>>(v);
              else if(k == "target") o.target = nb::cast<std::string>(v);
              else if(k == "output") o.output = nb::cast<std::string>(v);
              else if(k == "loss") o.loss = nb::cast<std::string>(v);
              else if(k == "optimizer") o.optimizer = nb::cast<std::string>(v);
              else if(k == "lr") o.lr = nb::cast<double>(v);
              else if(k == "momentum") o.momentum = nb::cast<double>(v);
              else if(k == "weight_decay") o.weightDecay = nb::cast<double>(v);
              else if(k == "clip_norm") o.clipNorm = nb::cast<double>(v);
              else if(k == "warmup") o.warmup = nb::cast<size_t>(v);
              else if(k == "decay") o.decay = nb::cast<std::string>(v);
              else if(k == "min_lr") o.minLr = nb::cast<double>(v);
              else if(k == "total_steps") o.totalSteps = nb::cast<size_t>(v);
              else if(k == "epochs") o.epochs = nb::cast<int>(v);
              else if(k == "batch_size") o.batchSize = nb::cast<int64_t>(v);
              else if(k == "accumulate") o.accumulate = nb::cast<int64_t>(v);
              else if(k == "shuffle") o.shuffle = nb::cast<bool>(v);
              else if(k == "seed") o.seed = nb::cast<uint64_t>(v);
              else if(k == "freeze") o.freeze = nb::cast<std::vector<std::string>>(v);
              else if(k == "device") o.device = nb::cast<std::string>(v);
              else if(k == "precision") o.precision = nb::cast<std::string>(v);
              else if(k == "threads") o.threads = nb::cast<int>(v);
              else if(k == "checkpoint_dir") o.checkpointDir = nb::cast<std::string>(v);
              else if(k == "checkpoint_every") o.checkpointEvery = nb::cast<int64_t>(v);
              else if(k == "resume") o.resume = nb::cast<bool>(v);
              else throw Error(str("Trainer: no option '", k, "'"));
            }
            TrainerCallbacks cb;
            cb.optionName = [](const std::string& field) {
              std::string s;
              for(char c : field) {
                if(c >= 'A' && c <= 'Z') {
                  s += '_';
                  s += static_cast<char>(c - 'A' + 'a');
                } else {
                  s += c;
                }
              }
              return s;
            };
            nb::gil_scoped_release nogil;
            new(self) Trainer(model, o, cb);
          },
          "model"_a, "options"_a)
      .def("step",
           [](Trainer& t, nb::dict batch) {
             Batch b = batchOf(batch, "Trainer.step");
             nb::gil_scoped_release nogil;
             return t.step(b);
           })
      .def("step_accumulated",
           [](Trainer& t, nb::list batches) {
             std::vector<Batch> bs;
             for(nb::handle h : batches) bs.push_back(batchOf(nb::borrow<nb::dict>(h), "Trainer.step_accumulated"));
             nb::gil_scoped_release nogil;
             return t.stepAccumulated(bs);
           })
      .def("compute_gradients",
           [](Trainer& t, nb::dict batch) {
             Batch b = batchOf(batch, "Trainer.compute_gradients");
             nb::gil_scoped_release nogil;
             return t.computeGradients(b);
           })
      .def("evaluate",
           [](Trainer& t, nb::list batches) {
             std::vector<Batch> bs;
             for(nb::handle h : batches) bs.push_back(batchOf(nb::borrow<nb::dict>(h), "Trainer.evaluate"));
             EvalResult r;
             {
               nb::gil_scoped_release nogil;
               r = t.evaluate(bs);
             }
             return evalDict(r);
           })
      .def("fit",
           [](Trainer& t, nb::dict train, std::optional<nb::dict> valid) {
             Dataset tr(batchOf(train, "Trainer.fit: train"), "train");
             Dataset va = valid ? Dataset(batchOf(*valid, "Trainer.fit: valid"), "valid") : Dataset();
             std::vector<EpochInfo> eps;
             {
               nb::gil_scoped_release nogil;
               eps = t.fit(std::move(tr), std::move(va));
             }
             nb::list l;
             for(const auto& e : eps) {
               nb::dict d;
               d["epoch"] = e.epoch;
               d["train_loss"] = e.trainLoss;
               d["seconds"] = e.seconds;
               if(e.validated) d["valid"] = evalDict(e.valid);
               l.append(d);
             }
             return l;
           },
           "train"_a, "valid"_a.none() = nb::none())
      .def("set_data",
           [](Trainer& t, nb::dict train, std::optional<nb::dict> valid) {
             Dataset tr(batchOf(train, "Trainer.set_data: train"), "train");
             Dataset va = valid ? Dataset(batchOf(*valid, "Trainer.set_data: valid"), "valid") : Dataset();
             t.setData(std::move(tr), std::move(va));
           },
           "train"_a, "valid"_a.none() = nb::none())
      .def("params", [](const Trainer& t) { return tensorsDict(t.params()); })
      .def("gradients", [](const Trainer& t) { return tensorsDict(t.gradients()); })
      .def_prop_ro("steps", &Trainer::steps)
      .def_prop_ro("learning_rate", &Trainer::learningRate)
      .def("save_checkpoint",
           [](Trainer& t, const std::string& path) {
             nb::gil_scoped_release nogil;
             t.saveCheckpoint(path);
           })
      .def("load_checkpoint",
           [](Trainer& t, const std::string& path) {
             TrainState s;
             {
               nb::gil_scoped_release nogil;
               s = t.loadCheckpoint(path);
             }
             nb::dict d;
             d["step"] = s.step;
             d["epoch"] = s.epoch;
             return d;
           })
      .def("export", [](Trainer& t, const std::string& path) {
        ExportResult r;
        {
          nb::gil_scoped_release nogil;
          r = t.exportModel(path);
        }
        return r.opset;
      });

  // ---- misc ----
  m.def("set_num_threads", [](int n) { host::setNumThreads(n); }, "threads"_a);
  m.def("_roundtrip", [](const AnyArray& a) { return toNumpy(tensorOf(a, "array")); },
        "An array through a Tensor and back, both without copies (for the tests).");
  m.def("_address", [](const AnyArray& a) { return reinterpret_cast<uintptr_t>(a.data()); });
  m.def("version", [] { return std::string(ONYX_VERSION_STRING); });
}
