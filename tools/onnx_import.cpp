// onnx-import: ONNX model -> native Onyx model (.npz with the params and the
// graph in friendly op names as JSON), optionally checked against a
// test_data_set folder.
#include <cstring>
#include <filesystem>
#include <iostream>

#include <CLI/CLI.hpp>

#include <onyx/converters/native_model.h>

#include "tool_common.h"

using namespace onyx;
namespace fs = std::filesystem;

namespace {

// Input values to build the graph with: test data, files, or zeros of the
// declared shapes (symbolic dims from --dim, else 1).
HostValues chooseInputs(const Model& model, const tools::TestDataSet* set, const std::vector<std::string>& files,
                        const std::vector<std::string>& dims) {
  std::map<std::string, int64_t> dimValues;
  for(const auto& d : dims) {
    size_t eq = d.find('=');
    if(eq == std::string::npos || eq == 0) throw Error(str("--dim '", d, "': expected NAME=N"));
    try {
      dimValues[d.substr(0, eq)] = std::stoll(d.substr(eq + 1));
    } catch(const std::exception&) {
      throw Error(str("--dim '", d, "': '", d.substr(eq + 1), "' is not a number"));
    }
  }
  HostValues in;
  if(set) in = set->inputs;
  for(const auto& spec : files) {
    size_t eq = spec.find('=');
    if(eq == std::string::npos || eq == 0) throw Error(str("--input '", spec, "': expected NAME=FILE"));
    std::string name = spec.substr(0, eq);
    const ValueInfo* info = nullptr;
    for(const auto& i : model.inputs())
      if(i.name == name) info = &i;
    if(!info) throw Error(str("--input '", spec, "': the model has no input '", name, "'"));
    in[name] = tools::readValueFile(spec.substr(eq + 1), info);
  }
  for(const auto& i : model.inputs()) {
    if(in.count(i.name)) continue;
    if(i.kind != "tensor") throw Error(str("input '", i.name, "' is a ", i.kind, ": give it with --input or --check-with"));
    if(!i.hasShape || i.type == Type::undefined)
      throw Error(str("input '", i.name, "' (", i.describe(), ") has no declared shape: give it with --input"));
    std::vector<int64_t> shape;
    for(size_t d = 0; d < i.dims.size(); ++d) {
      if(i.dims[d] >= 0) {
        shape.push_back(i.dims[d]);
        continue;
      }
      const std::string& sym = i.dimNames[d];
      auto it = dimValues.find(sym);
      if(sym.empty() || it == dimValues.end()) {
        std::cerr << "onnx-import: note: input '" << i.name << "' axis " << d << " ("
                  << (sym.empty() ? "unnamed" : sym) << ") is built as 1; set it with --dim "
                  << (sym.empty() ? "NAME" : sym) << "=N\n";
        shape.push_back(1);
      } else {
        shape.push_back(it->second);
      }
    }
    Tensor t = TensorBase::create(Shape(shape), i.type);
    if(t->type() != Type::string && t->bytes()) std::memset(t->raw(), 0, t->bytes());
    in[i.name] = HostValue::of(t);
  }
  return in;
}

std::string humanBytes(double b) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  int u = 0;
  while(b >= 1024 && u < 3) {
    b /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof buf, u ? "%.1f %s" : "%.0f %s", b, units[u]);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Imports an ONNX model into Onyx's native format (.npz: params as arrays, the graph as JSON).\n\n"
               "Examples:\n"
               "  onnx-import model.onnx -o model.npz\n"
               "  onnx-import test_relu/model.onnx -o relu.npz --check-with test_relu/test_data_set_0\n"
               "  onnx-import bert.onnx -o bert.npz --dim batch=8 --dim seq=128\n"
               "  python3 -c \"import numpy, json; z = numpy.load('model.npz'); print(json.loads(z['graph.json'])['nodes'][0])\"\n"};
  std::string modelPath, outPath, checkWith;
  std::vector<std::string> inputs, dims;
  bool frozen = false;
  double rtol = 1e-3, atol = 1e-5;
  app.add_option("model", modelPath, "the .onnx file")->required();
  app.add_option("-o,--output", outPath, "the native model to write (.npz)")->required();
  app.add_option("--check-with", checkWith,
                 "a test_data_set_N folder: build with its inputs and compare the outputs with its output_*.pb");
  app.add_option("--input", inputs, "NAME=FILE (.npy or .pb): build the graph for this input");
  app.add_option("--dim", dims, "NAME=N: the value of a symbolic input dim (default 1)");
  app.add_flag("--frozen", frozen, "keep initializers as constants (default: float initializers become trainable params)");
  app.add_option("--rtol", rtol, "relative tolerance for --check-with")->capture_default_str();
  app.add_option("--atol", atol, "absolute tolerance for --check-with")->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  try {
    auto model = Model::load(modelPath);
    tools::TestDataSet set;
    if(!checkWith.empty()) set = tools::readTestDataSet(checkWith, *model);
    HostValues in = chooseInputs(*model, checkWith.empty() ? nullptr : &set, inputs, dims);

    auto graph = New<ExpressionGraph>();
    graph->setInference(true);
    ImportedGraph imported = importGraph(*model, *graph, in, !frozen);
    if(imported.valueDependent)
      std::cerr << "onnx-import: note: the graph's structure depends on input values (e.g. NonZero, If or a shape "
                   "computed from data); the native model is built for the inputs given\n";
    for(auto& o : imported.spec.outputs) o.second->keepValue();
    graph->forward();

    if(!checkWith.empty()) {
      for(const auto& kv : set.expected) {
        const Expr* e = nullptr;
        for(const auto& o : imported.spec.outputs)
          if(o.first == kv.first) e = &o.second;
        if(!e) throw Error(str("output '", kv.first, "' is not a tensor output of the graph"));
        std::string r = tools::compareValues(kv.second, HostValue::of(nodeHostValue(e->get())), rtol, atol);
        if(!r.empty()) {
          std::cerr << "onnx-import: " << checkWith << ": output '" << kv.first << "': " << r << "\n";
          return 1;
        }
      }
    }
    saveNative(outPath, imported.spec);

    // The file must reload to the same graph: the native model is what users keep.
    {
      ExpressionGraph check;
      GraphSpec back = loadNative(outPath, check);
      if(nativeGraphJson(back) != nativeGraphJson(imported.spec))
        throw InternalError(str(outPath, ": the written native model does not reload to the same graph"));
    }

    std::map<std::string, int> ops;
    int64_t params = 0, paramElems = 0, consts = 0, constBytes = 0;
    for(auto& kv : nameGraphNodes(imported.spec)) {
      Node* n = kv.first;
      if(n->kind() == NodeKind::Op) ++ops[n->type()];
      if(n->kind() == NodeKind::Param) {
        ++params;
        paramElems += n->shape().elements();
      }
      if(n->kind() == NodeKind::Constant) {
        ++consts;
        constBytes += n->value_type() == Type::string ? 0 : static_cast<int64_t>(typeBytes(n->value_type(), static_cast<size_t>(n->shape().elements())));
      }
    }
    std::cout << outPath << ": " << humanBytes(static_cast<double>(fs::file_size(outPath))) << ", " << params
              << " params (" << paramElems << " values), " << consts << " constants (" << humanBytes(double(constBytes))
              << ")\n  ops:";
    for(auto& kv : ops) std::cout << " " << kv.first << " x" << kv.second;
    std::cout << "\n";
    if(!checkWith.empty()) std::cout << "  outputs match " << checkWith << "\n";
    return 0;
  } catch(const std::exception& e) {
    std::cerr << "onnx-import: " << e.what() << "\n";
    return 1;
  }
}
