#include <onyx/onnx/tensor_proto.h>

#include <cstdlib>
#include <cstring>
#include <new>
#include <filesystem>
#include <fstream>

namespace onyx {

namespace fs = std::filesystem;

namespace {

Type checkedType(int32_t dt, const std::string& what) {
  if(dt <= 0 || dt >= kNumTypes) throw Error(str(what, ": unknown element type ", dt));
  return static_cast<Type>(dt);
}

// Reads [offset, offset+length) of an external file under `dir`.
std::string readExternal(const ::onnx::TensorProto& t, const std::string& dir, const std::string& what,
                         size_t expectBytes) {
  std::string location;
  int64_t offset = 0, length = -1;
  for(const auto& kv : t.external_data()) {
    auto number = [&](const std::string& v) {
      char* end = nullptr;
      long long n = std::strtoll(v.c_str(), &end, 10);
      if(v.empty() || *end != '\0') throw Error(str(what, ": external data ", kv.key(), " '", v, "' is not a number"));
      return static_cast<int64_t>(n);
    };
    if(kv.key() == "location") location = kv.value();
    else if(kv.key() == "offset") offset = number(kv.value());
    else if(kv.key() == "length") length = number(kv.value());
  }
  if(location.empty()) throw Error(str(what, ": external data without a location"));
  fs::path rel(location);
  if(rel.is_absolute()) throw Error(str(what, ": external data path '", location, "' is absolute; it must be relative to the model's folder"));
  std::error_code ec;
  fs::path base = fs::weakly_canonical(fs::absolute(dir), ec);
  fs::path full = fs::weakly_canonical(fs::absolute(fs::path(dir) / rel), ec);
  if(ec) throw Error(str(what, ": external data path '", location, "' cannot be resolved"));
  // Canonical paths resolve symlinks: the file must stay inside the model's folder.
  auto b = base.native(), f = full.native();
  if(f.size() <= b.size() || f.compare(0, b.size(), b) != 0 || f[b.size()] != '/')
    throw Error(str(what, ": external data path '", location, "' leaves the model's folder"));
  if(!fs::is_regular_file(full, ec)) throw Error(str(what, ": external data file '", location, "' not found"));
  uint64_t fileSize = fs::file_size(full, ec);
  if(offset < 0) throw Error(str(what, ": negative external data offset"));
  if(length < 0) length = static_cast<int64_t>(expectBytes);
  if(static_cast<size_t>(length) != expectBytes)
    throw Error(str(what, ": external data length ", length, " does not match its shape (", expectBytes, " bytes)"));
  if(static_cast<uint64_t>(offset) + static_cast<uint64_t>(length) > fileSize)
    throw Error(str(what, ": external data [", offset, ", ", static_cast<uint64_t>(offset) + static_cast<uint64_t>(length), ") lies beyond the end of '", location,
                    "' (", fileSize, " bytes)"));
  std::ifstream in(full, std::ios::binary);
  in.seekg(offset);
  std::string data(static_cast<size_t>(length), '\0');
  in.read(&data[0], length);
  if(!in) throw Error(str(what, ": cannot read external data from '", location, "'"));
  return data;
}

// The typed field a TensorProto without raw_data keeps its values in, and how
// many values the shape needs there (packed types store bytes).
struct TypedField {
  const char* name = nullptr;
  int64_t count = 0;
};

TypedField typedField(const ::onnx::TensorProto& t, Type type) {
  switch(type) {
    case Type::float32: return {"float_data", t.float_data_size()};
    case Type::float64: return {"double_data", t.double_data_size()};
    case Type::int64: return {"int64_data", t.int64_data_size()};
    case Type::uint32: case Type::uint64: return {"uint64_data", t.uint64_data_size()};
    case Type::int32: case Type::int16: case Type::int8: case Type::uint16: case Type::uint8:
    case Type::boolean: case Type::float16: case Type::bfloat16:
    case Type::float8e4m3fn: case Type::float8e4m3fnuz: case Type::float8e5m2: case Type::float8e5m2fnuz:
    case Type::float8e8m0:
    case Type::int4: case Type::uint4: case Type::float4e2m1: case Type::int2: case Type::uint2:
      return {"int32_data", t.int32_data_size()};
    default: return {};
  }
}

}  // namespace

Tensor tensorFromOnnx(const ::onnx::TensorProto& t, const std::string& dir, const std::string& what) {
  Type type = checkedType(t.data_type(), what);
  std::vector<int64_t> dims;
  for(auto d : t.dims()) {
    if(d < 0) throw Error(str(what, ": negative dimension ", d));
    dims.push_back(d);
  }
  Shape shape = [&] {
    try {
      return Shape(dims);
    } catch(const Error& e) {
      throw Error(str(what, ": ", e.what()));
    }
  }();
  int64_t n = shape.elements();
  // Memory the system refuses is an error naming the tensor.
  auto allocate = [&] {
    try {
      return TensorBase::create(shape, type);
    } catch(const Error& e) {
      throw Error(str(what, ": ", e.what()));
    } catch(const std::bad_alloc&) {
      throw Error(str(what, ": out of memory for shape ", shape, " of ", typeName(type)));
    }
  };
  if(type == Type::complex64 || type == Type::complex128)
    throw Error(str(what, ": element type ", typeName(type), " is not supported"));
  // The data is checked against the shape before anything is allocated: a
  // header that claims 2^50 elements over a few bytes is an error, not an
  // allocation.
  if(type == Type::string) {
    if(static_cast<int64_t>(t.string_data_size()) != n)
      throw Error(str(what, ": string_data holds ", t.string_data_size(), " values but the shape needs ", n));
    Tensor out = allocate();
    for(int64_t i = 0; i < n; ++i) out->strings()[static_cast<size_t>(i)] = t.string_data(static_cast<int>(i));
    return out;
  }
  size_t bytes = typeBytes(type, static_cast<size_t>(n));
  const bool packed = typeBits(type) < 8;
  // Bytes are copied as they are, except bool, which is normalised to 0/1
  // (any other byte would be undefined behaviour in a bool kernel).
  auto finish = [&](Tensor out) {
    if(type == Type::boolean) {
      auto* p = static_cast<uint8_t*>(out->raw());
      for(size_t i = 0; i < bytes; ++i) p[i] = p[i] != 0;
    }
    return out;
  };
  if(t.data_location() == ::onnx::TensorProto::EXTERNAL) {
    std::string data = readExternal(t, dir, what, bytes);
    Tensor out = allocate();
    if(bytes) std::memcpy(out->raw(), data.data(), bytes);
    return finish(out);
  }
  if(t.has_raw_data()) {
    if(t.raw_data().size() != bytes)
      throw Error(str(what, ": raw_data has ", t.raw_data().size(), " bytes but shape ", shape, " of ", typeName(type),
                      " needs ", bytes));
    Tensor out = allocate();
    if(bytes) std::memcpy(out->raw(), t.raw_data().data(), bytes);
    return finish(out);
  }
  TypedField field = typedField(t, type);
  if(!field.name) throw Error(str(what, ": element type ", typeName(type), " is not supported"));
  int64_t need = packed ? static_cast<int64_t>(bytes) : n;
  if(field.count != need)
    throw Error(str(what, ": ", field.name, " holds ", field.count, packed ? " bytes" : " values",
                    " but the shape needs ", need));
  Tensor out = allocate();
  char* dst = static_cast<char*>(out->raw());
  switch(type) {
    case Type::float32:
      if(n) std::memcpy(dst, t.float_data().data(), bytes);
      break;
    case Type::float64:
      if(n) std::memcpy(dst, t.double_data().data(), bytes);
      break;
    case Type::int64:
      if(n) std::memcpy(dst, t.int64_data().data(), bytes);
      break;
    case Type::uint32: case Type::uint64:
      for(int64_t i = 0; i < n; ++i) {
        uint64_t v = t.uint64_data(static_cast<int>(i));
        if(type == Type::uint32) reinterpret_cast<uint32_t*>(dst)[i] = static_cast<uint32_t>(v);
        else reinterpret_cast<uint64_t*>(dst)[i] = v;
      }
      break;
    default:
      if(packed) {  // several elements per byte; int32_data holds the bytes
        for(int64_t i = 0; i < need; ++i)
          reinterpret_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(t.int32_data(static_cast<int>(i)));
        break;
      }
      for(int64_t i = 0; i < n; ++i) {
        int32_t v = t.int32_data(static_cast<int>(i));
        switch(typeBits(type)) {
          case 32: reinterpret_cast<int32_t*>(dst)[i] = v; break;
          case 16: reinterpret_cast<uint16_t*>(dst)[i] = static_cast<uint16_t>(v); break;
          default: reinterpret_cast<uint8_t*>(dst)[i] = static_cast<uint8_t>(v); break;
        }
      }
      break;
  }
  return finish(out);
}

void tensorToOnnx(const TensorBase& t, ::onnx::TensorProto& out) {
  out.Clear();
  out.set_data_type(static_cast<int32_t>(t.type()));
  for(int64_t d : t.shape().dims()) out.add_dims(d);
  if(t.type() == Type::string) {
    for(const auto& s : const_cast<TensorBase&>(t).strings()) out.add_string_data(s);
    return;
  }
  // A tensor on a GPU (a param trained there) is read through a host copy.
  Tensor host = t.onHost() ? Tensor() : t.hostCopy();
  const TensorBase& h = host ? *host : t;
  out.set_raw_data(static_cast<const char*>(h.raw()), h.bytes());
}

std::string describeOnnxType(const ::onnx::TypeProto& t) {
  switch(t.value_case()) {
    case ::onnx::TypeProto::kTensorType: {
      std::string s = t.tensor_type().elem_type() > 0 && t.tensor_type().elem_type() < kNumTypes
                          ? typeName(static_cast<Type>(t.tensor_type().elem_type()))
                          : "?";
      if(t.tensor_type().has_shape()) {
        s += "[";
        for(int i = 0; i < t.tensor_type().shape().dim_size(); ++i) {
          const auto& d = t.tensor_type().shape().dim(i);
          if(i) s += ",";
          s += d.has_dim_value() && d.dim_value() > 0 ? std::to_string(d.dim_value())
                                                      : (d.has_dim_param() ? d.dim_param() : "?");
        }
        s += "]";
      }
      return s;
    }
    case ::onnx::TypeProto::kSequenceType: return "seq(" + describeOnnxType(t.sequence_type().elem_type()) + ")";
    case ::onnx::TypeProto::kOptionalType: return "optional(" + describeOnnxType(t.optional_type().elem_type()) + ")";
    case ::onnx::TypeProto::kMapType: {
      int k = t.map_type().key_type();
      return str("map(", k > 0 && k < kNumTypes ? typeName(static_cast<Type>(k)) : "?", ",",
                 describeOnnxType(t.map_type().value_type()), ")");
    }
    default: return "?";
  }
}


Type onnxElemType(const ::onnx::TypeProto& t) {
  switch(t.value_case()) {
    case ::onnx::TypeProto::kTensorType: {
      int e = t.tensor_type().elem_type();
      return e > 0 && e < kNumTypes ? static_cast<Type>(e) : Type::undefined;
    }
    case ::onnx::TypeProto::kSequenceType: return onnxElemType(t.sequence_type().elem_type());
    case ::onnx::TypeProto::kOptionalType: return onnxElemType(t.optional_type().elem_type());
    default: return Type::undefined;
  }
}

}  // namespace onyx
