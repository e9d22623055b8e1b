#include <onyx/converters/native_model.h>

#include <cmath>
#include <cstring>
#include <map>

#include <onyx/io/json.h>
#include <onyx/io/npz.h>

namespace onyx {

namespace {

using json::Value;

constexpr const char* kGraphMember = "graph.json";
constexpr int kVersion = 1;

Value floatValue(double d) {
  if(std::isnan(d)) return Value::string("nan");
  if(std::isinf(d)) return Value::string(d > 0 ? "inf" : "-inf");
  return Value::number(d);
}

Value attrJson(const AttrValue& v) {
  switch(static_cast<AttrKind>(v.index())) {
    case AttrKind::Int: return Value::number(std::get<int64_t>(v));
    case AttrKind::Float: return floatValue(std::get<double>(v));
    case AttrKind::String: return Value::string(std::get<std::string>(v));
    case AttrKind::Ints: {
      Value a = Value::array();
      for(int64_t x : std::get<IntList>(v)) a.push(Value::number(x));
      return a;
    }
    case AttrKind::Floats: {
      Value a = Value::array();
      for(double x : std::get<FloatList>(v)) a.push(floatValue(x));
      return a;
    }
  }
  return Value();
}

AttrValue attrFromJson(const Value& j, AttrKind kind, const std::string& where) {
  switch(kind) {
    case AttrKind::Int: return j.asInt(where);
    case AttrKind::Float: return j.asDouble(where);
    case AttrKind::String: return j.asString(where);
    case AttrKind::Ints: {
      IntList l;
      for(auto& x : j.asArray(where)) l.push_back(x.asInt(where));
      return l;
    }
    case AttrKind::Floats: {
      FloatList l;
      for(auto& x : j.asArray(where)) l.push_back(x.asDouble(where));
      return l;
    }
  }
  return int64_t(0);
}

Value shapeJson(const Shape& s) {
  Value a = Value::array();
  for(int64_t d : s.dims()) a.push(Value::number(d));
  return a;
}

Shape shapeFromJson(const Value& j, const std::string& where) {
  std::vector<int64_t> dims;
  for(auto& d : j.asArray(where)) {
    int64_t v = d.asInt(where);
    if(v < 0) fail(where, ": negative dim ", v);
    dims.push_back(v);
  }
  return Shape(dims);
}

}  // namespace

namespace {

struct NativeParts {
  std::string json;
  std::vector<std::pair<std::string, std::string>> members;  // name.npy -> bytes
};

NativeParts buildNative(const GraphSpec& spec, bool withArrays) {
  auto named = nameGraphNodes(spec);
  std::map<Node*, std::string> names(named.begin(), named.end());
  Value root = Value::object();
  root.set("format", Value::string("onyx-native"));
  root.set("version", Value::number(int64_t(kVersion)));
  root.set("graph_name", Value::string(spec.graphName));
  root.set("doc_string", Value::string(spec.docString));
  root.set("producer_name", Value::string(spec.producerName));
  root.set("producer_version", Value::string(spec.producerVersion));
  Value inputs = Value::array(), nodes = Value::array(), outputs = Value::array();
  NativeParts parts;
  for(auto& kv : named) {
    Node* n = kv.first;
    const std::string& name = kv.second;
    Value j = Value::object();
    j.set("name", Value::string(name));
    switch(n->kind()) {
      case NodeKind::Input: {
        j.set("type", Value::string(typeName(n->value_type())));
        j.set("shape", shapeJson(n->shape()));
        auto dn = spec.dimNames.find(name);
        if(dn != spec.dimNames.end()) {
          Value d = Value::array();
          for(auto& s : dn->second) d.push(Value::string(s));
          j.set("dims", d);
        }
        inputs.push(j);
        continue;
      }
      case NodeKind::Param:
      case NodeKind::Constant: {
        j.set("kind", Value::string(n->kind() == NodeKind::Param ? "param" : "const"));
        j.set("type", Value::string(typeName(n->value_type())));
        j.set("shape", shapeJson(n->shape()));
        if(n->kind() == NodeKind::Param) j.set("trainable", Value::boolean(n->trainable()));
        Tensor t = withArrays || n->value_type() == Type::string ? nodeHostValue(n) : Tensor();
        if(n->value_type() == Type::string) {
          Value v = Value::array();
          for(auto& s : t->strings()) v.push(Value::string(s));
          j.set("value", v);
        } else if(!io::npyStorable(n->value_type())) {
          j.set("storage", Value::string("raw"));
          if(withArrays) {
            Tensor raw = TensorBase::create(Shape({static_cast<int64_t>(t->bytes())}), Type::uint8);
            if(t->bytes()) std::memcpy(raw->raw(), t->raw(), t->bytes());
            parts.members.emplace_back(name + ".npy", io::npyBytes(*raw));
          }
        } else if(withArrays) {
          parts.members.emplace_back(name + ".npy", io::npyBytes(*t));
        }
        break;
      }
      case NodeKind::Op: {
        j.set("op", Value::string(n->op()->name));
        Value ins = Value::array();
        for(size_t i = 0; i < n->numChildren(); ++i) ins.push(Value::string(names.at(n->child(i).get())));
        j.set("inputs", ins);
        Value attrs = Value::object();
        const auto& values = n->attrValues();
        for(size_t k = 0; k < n->op()->attrSpecs.size(); ++k) attrs.set(n->op()->attrSpecs[k].name, attrJson(values[k]));
        j.set("attrs", attrs);
        j.set("type", Value::string(typeName(n->value_type())));
        j.set("shape", shapeJson(n->shape()));
        break;
      }
    }
    nodes.push(j);
  }
  for(auto& o : spec.outputs) {
    Value j = Value::object();
    j.set("name", Value::string(o.first));
    j.set("node", Value::string(names.at(o.second.get())));
    outputs.push(j);
  }
  for(auto& o : spec.sequenceOutputs) {
    Value j = Value::object();
    j.set("name", Value::string(o.first));
    Value items = Value::array();
    for(auto& e : o.second.items) items.push(Value::string(names.at(e.get())));
    j.set("sequence", items);
    if(o.second.elemType != Type::undefined) j.set("elem_type", Value::string(typeName(o.second.elemType)));
    outputs.push(j);
  }
  root.set("inputs", inputs);
  root.set("nodes", nodes);
  root.set("outputs", outputs);
  if(!spec.nodeDocStrings.empty()) {
    Value d = Value::object();
    for(auto& kv : spec.nodeDocStrings) d.set(kv.first, Value::string(kv.second));
    root.set("doc_strings", d);
  }
  parts.json = root.dump();
  return parts;
}

}  // namespace

std::string nativeGraphJson(const GraphSpec& spec) { return buildNative(spec, false).json; }

void saveNative(const std::string& path, const GraphSpec& spec) {
  NativeParts p = buildNative(spec, true);
  p.members.emplace_back(kGraphMember, p.json);
  io::saveZip(path, p.members);
}

GraphSpec loadNative(const std::string& path, ExpressionGraph& graph) {
  auto members = io::loadZip(path);
  std::map<std::string, const std::string*> byName;
  for(auto& m : members) byName[m.first] = &m.second;
  auto gj = byName.find(kGraphMember);
  ONYX_CHECK(gj != byName.end(), path, ": not a native Onyx model (no ", kGraphMember, " member)");
  const std::string where = path + ":" + kGraphMember;
  Value root = json::parse(*gj->second, where);
  ONYX_CHECK(root.isObject(), where, ": expected an object at the top");
  const Value* fmt = root.find("format");
  ONYX_CHECK(fmt && fmt->isString() && fmt->asString(where) == "onyx-native", where,
             ": \"format\" must be \"onyx-native\"");
  int64_t version = root.at("version", where).asInt(where + ": version");
  ONYX_CHECK(version == kVersion, where, ": version ", version, " is not supported (this build reads version ", kVersion,
             ")");
  GraphSpec spec;
  auto optString = [&](const char* key, std::string& dst) {
    if(const Value* v = root.find(key)) dst = v->asString(where + ": " + key);
  };
  optString("graph_name", spec.graphName);
  optString("doc_string", spec.docString);
  optString("producer_name", spec.producerName);
  optString("producer_version", spec.producerVersion);
  if(const Value* d = root.find("doc_strings"))
    for(auto& kv : d->members()) spec.nodeDocStrings[kv.first] = kv.second.asString(where + ": doc_strings");

  std::map<std::string, Expr> values;
  auto define = [&](const std::string& name, Expr e, const std::string& at) {
    ONYX_CHECK(!values.count(name), at, ": the name '", name, "' is defined twice");
    values[name] = e;
  };
  auto array = [&](const std::string& name, const std::string& at) -> Tensor {
    auto it = byName.find(name + ".npy");
    ONYX_CHECK(it != byName.end(), at, ": no member '", name, ".npy' holds its value");
    return io::parseNpy(*it->second, path + ":" + name + ".npy");
  };

  const auto& inputs = root.at("inputs", where).asArray(where + ": inputs");
  for(size_t k = 0; k < inputs.size(); ++k) {
    const Value& j = inputs[k];
    std::string at = str(where, ": inputs[", k, "]");
    std::string name = j.at("name", at).asString(at + ": name");
    at = str(where, ": input '", name, "'");
    Type type = typeFromName(j.at("type", at).asString(at + ": type"));
    Shape shape = shapeFromJson(j.at("shape", at), at + ": shape");
    if(const Value* d = j.find("dims")) {
      std::vector<std::string> dims;
      for(auto& x : d->asArray(at + ": dims")) dims.push_back(x.asString(at + ": dims"));
      ONYX_CHECK(dims.size() == static_cast<size_t>(shape.rank()), at, ": ", dims.size(), " dim names for rank ",
                 shape.rank());
      spec.dimNames[name] = dims;
    }
    define(name, graph.input(name, shape, type), at);
  }

  const auto& nodes = root.at("nodes", where).asArray(where + ": nodes");
  for(size_t k = 0; k < nodes.size(); ++k) {
    const Value& j = nodes[k];
    std::string at = str(where, ": nodes[", k, "]");
    std::string name = j.at("name", at).asString(at + ": name");
    at = str(where, ": node '", name, "'");
    Type type = typeFromName(j.at("type", at).asString(at + ": type"));
    Shape shape = shapeFromJson(j.at("shape", at), at + ": shape");
    if(const Value* op = j.find("op")) {
      std::string opName = op->asString(at + ": op");
      const OpDef* def = Registry::instance().find(opName);
      ONYX_CHECK(def, at, ": unknown op '", opName, "'");
      at = str(where, ": node '", name, "' (", opName, ")");
      std::vector<Expr> ins;
      for(auto& i : j.at("inputs", at).asArray(at + ": inputs")) {
        std::string in = i.asString(at + ": inputs");
        auto it = values.find(in);
        ONYX_CHECK(it != values.end(), at, ": input '", in, "' is not defined by an earlier input or node");
        ins.push_back(it->second);
      }
      std::vector<std::pair<std::string, AttrValue>> attrs;
      if(const Value* a = j.find("attrs")) {
        ONYX_CHECK(a->isObject(), at, ": \"attrs\" must be an object");
        for(auto& kv : a->members()) {
          int idx = def->attrIndex(kv.first.c_str());
          ONYX_CHECK(idx >= 0, at, ": op '", opName, "' has no attribute '", kv.first, "'");
          attrs.emplace_back(kv.first, attrFromJson(kv.second, def->attrSpecs[static_cast<size_t>(idx)].kind(),
                                                    at + ": attribute '" + kv.first + "'"));
        }
      }
      Expr e;
      try {
        e = graph.make(*def, ins, attrs);
      } catch(const Error& err) {
        throw Error(str(at, ": ", err.what()));
      }
      ONYX_CHECK(e->shape() == shape && e->value_type() == type, at, ": the graph infers ", e->shape(), " ",
                 typeName(e->value_type()), " but the file records ", shape, " ", typeName(type));
      if(e->name().empty()) e->set_name(name);
      define(name, e, at);
      continue;
    }
    std::string kind = j.at("kind", at).asString(at + ": kind");
    ONYX_CHECK(kind == "param" || kind == "const", at, ": \"kind\" must be \"param\" or \"const\" (or the node needs an \"op\")");
    Tensor value;
    if(type == Type::string) {
      const auto& v = j.at("value", at).asArray(at + ": value");
      ONYX_CHECK(static_cast<int64_t>(v.size()) == shape.elements(), at, ": ", v.size(), " strings for shape ", shape);
      value = TensorBase::create(shape, Type::string);
      for(size_t i = 0; i < v.size(); ++i) value->strings()[i] = v[i].asString(at + ": value");
    } else if(const Value* st = j.find("storage")) {
      ONYX_CHECK(st->asString(at + ": storage") == "raw", at, ": unknown \"storage\"");
      Tensor raw = array(name, at);
      value = TensorBase::create(shape, type);
      ONYX_CHECK(raw->type() == Type::uint8 && raw->bytes() == value->bytes(), at, ": raw storage of ", raw->bytes(),
                 " bytes for ", shape, " ", typeName(type), " (", value->bytes(), " bytes)");
      if(value->bytes()) std::memcpy(value->raw(), raw->raw(), value->bytes());
    } else {
      value = array(name, at);
      ONYX_CHECK(value->type() == type && value->shape() == shape, at, ": the stored array is ", value->shape(), " ",
                 typeName(value->type()), " but the graph says ", shape, " ", typeName(type));
    }
    Expr e;
    if(kind == "param") {
      bool trainable = true;
      if(const Value* t = j.find("trainable")) trainable = t->asBool(at + ": trainable");
      Tensor src = value;
      e = graph.param(name, shape, [src](TensorBase& dst, Rng&) { dst.copyFrom(*src); }, type, trainable);
      ONYX_CHECK(e->shape() == shape, at, ": the graph already has a param '", name, "' of shape ", e->shape());
    } else {
      if(value->getDeviceId() != graph.getDeviceId()) {
        Tensor d = TensorBase::create(shape, type, graph.getDeviceId());
        d->copyFrom(*value);
        value = d;
      }
      e = graph.constant(value);
      e->set_name(name);
    }
    define(name, e, at);
  }

  const auto& outputs = root.at("outputs", where).asArray(where + ": outputs");
  ONYX_CHECK(!outputs.empty(), where, ": the graph has no outputs");
  for(size_t k = 0; k < outputs.size(); ++k) {
    std::string at = str(where, ": outputs[", k, "]");
    std::string name = outputs[k].at("name", at).asString(at + ": name");
    if(const Value* seq = outputs[k].find("sequence")) {
      GraphSpec::Sequence s;
      for(auto& item : seq->asArray(at + ": sequence")) {
        std::string node = item.asString(at + ": sequence");
        auto it = values.find(node);
        ONYX_CHECK(it != values.end(), at, ": output '", name, "' names node '", node, "', which the graph does not define");
        s.items.push_back(it->second);
      }
      if(const Value* t = outputs[k].find("elem_type")) s.elemType = typeFromName(t->asString(at + ": elem_type"));
      spec.sequenceOutputs.emplace_back(name, std::move(s));
      continue;
    }
    std::string node = outputs[k].at("node", at).asString(at + ": node");
    auto it = values.find(node);
    ONYX_CHECK(it != values.end(), at, ": output '", name, "' names node '", node, "', which the graph does not define");
    spec.outputs.emplace_back(name, it->second);
  }
  return spec;
}

}  // namespace onyx
